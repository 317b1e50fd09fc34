// Package leaktest tells the goroutines that a piece of code left running,
// for the tests of lifecycles: Start, then Stop, leaves nothing behind.
//
// A goroutine is known by its stack: the functions on it, without
// arguments, file positions or goroutine ids. [Snapshot] counts the
// goroutines of each stack; [Check] waits until no stack has more
// goroutines than in a snapshot taken before, and fails the test with the
// stacks of those left over otherwise. Goroutines that ended meanwhile (of
// other tests, say) do not count, so run the code under test where no
// parallel test starts goroutines of the same stacks, or in a test that is
// not parallel.
package leaktest

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Goroutines counts running goroutines by stack.
type Goroutines map[string]int

// Snapshot returns the goroutines running now, except the caller's.
func Snapshot() Goroutines {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	g := Goroutines{}
	// The caller's goroutine comes first.
	for i, block := range strings.Split(string(buf), "\n\n") {
		if i > 0 {
			g[stack(block)]++
		}
	}
	return g
}

// stack returns the functions of a goroutine's block of runtime.Stack,
// one a line.
func stack(block string) string {
	var fns []string
	for _, line := range strings.Split(block, "\n")[1:] { // after "goroutine N [state]:"
		if line == "" || strings.HasPrefix(line, "\t") {
			continue // a file position
		}
		line, _, _ = strings.Cut(line, " in goroutine ")
		if i := strings.LastIndex(line, "("); i > 0 && !strings.HasPrefix(line, "created by ") {
			line = line[:i]
		}
		fns = append(fns, line)
	}
	return strings.Join(fns, "\n")
}

// Leaked returns the stacks of which more goroutines run now than in
// before, with how many more.
func Leaked(before Goroutines) Goroutines {
	out := Goroutines{}
	for s, n := range Snapshot() {
		if n > before[s] {
			out[s] = n - before[s]
		}
	}
	return out
}

// Check waits up to within for every goroutine started since before to
// end, and fails t with the stacks of those still running then.
func Check(t testing.TB, before Goroutines, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := Leaked(before)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutine stacks left running after %s:\n%s", len(left), within, left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// String lists the stacks, most goroutines first.
func (g Goroutines) String() string {
	stacks := make([]string, 0, len(g))
	for s := range g {
		stacks = append(stacks, s)
	}
	sort.Slice(stacks, func(i, j int) bool { return g[stacks[i]] > g[stacks[j]] })
	var b strings.Builder
	for _, s := range stacks {
		fmt.Fprintf(&b, "%d × %s\n\n", g[s], strings.ReplaceAll(s, "\n", "\n    "))
	}
	return b.String()
}
