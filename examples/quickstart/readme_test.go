package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADME_GoBlocksAreThisProgram checks that every Go block of the
// repository's README.md is a region of this file marked
// "// readme:NAME" ... "// readme:end" (indentation aside), and that every
// marked region is in the README: the README's code is compiled and run by
// this package's tests, so it cannot drift.
func TestREADME_GoBlocksAreThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	regions := markedRegions(string(src))
	if len(regions) == 0 {
		t.Fatal("main.go has no // readme:NAME regions")
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindAllStringSubmatch(string(readme), -1)
	quoted := map[string]bool{}
	for i, b := range blocks {
		name, ok := findRegion(regions, dedent(b[1]))
		if !ok {
			t.Errorf("README.md's Go block %d is no region of examples/quickstart/main.go:\n%s", i+1, b[1])
		}
		quoted[name] = true
	}
	for name := range regions {
		if !quoted[name] {
			t.Errorf("region readme:%s of main.go is not in README.md", name)
		}
	}
}

// markedRegions returns the dedented text of each "// readme:NAME" region.
func markedRegions(src string) map[string]string {
	re := regexp.MustCompile(`(?ms)^[ \t]*// readme:(\w+)\n(.*?)^[ \t]*// readme:end\n`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		if m[1] != "end" {
			out[m[1]] = dedent(m[2])
		}
	}
	return out
}

func findRegion(regions map[string]string, block string) (string, bool) {
	for name, text := range regions {
		if text == block {
			return name, true
		}
	}
	return "", false
}

// dedent removes the tabs that every non-empty line of s starts with, and
// the final newline.
func dedent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "\n")
}
