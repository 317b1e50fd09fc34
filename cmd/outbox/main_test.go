package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// labPackages are what the production binary must not link: the
// fault-injection harness and its proxy, the bench, the demo, the
// reference order system and SQLite. cmd/outbox-lab has them.
var labPackages = []string{
	"github.com/outbox-dev/outbox/internal/chaos",
	"github.com/outbox-dev/outbox/internal/bench",
	"github.com/outbox-dev/outbox/internal/demo",
	"github.com/outbox-dev/outbox/internal/cli/lab",
	"github.com/outbox-dev/outbox/examples/",
	"github.com/Shopify/toxiproxy",
	"github.com/outbox-dev/outbox/store/sqlitestore",
	"modernc.org/sqlite",
}

func TestOutbox_LinksNoLabPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, lab := range labPackages {
			if strings.HasPrefix(pkg, lab) {
				t.Errorf("cmd/outbox depends on %s", pkg)
			}
		}
	}
}

// A binary built from a checkout names the commit it was built from.
func TestVersion_NamesTheCommitTheBinaryWasBuiltFrom(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	// The go command finds a repository by its .git directory; a linked
	// worktree's .git is a file, so a build there records no commit
	// (golang/go#58218).
	dirs, err := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").Output()
	if f := strings.Fields(string(dirs)); err != nil || len(f) != 2 || f[0] != f[1] {
		t.Skipf("in a linked git worktree (%q, %v): the go command records no commit there", dirs, err)
	}
	bin := filepath.Join(t.TempDir(), "outbox")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("outbox version: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := "commit " + strings.TrimSpace(string(head)) + " "
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "outbox ") || lines[0] == "outbox (devel)" || !strings.HasPrefix(lines[1], want) {
		t.Errorf("outbox version:\n%s\nwant outbox <module version>, then a line starting %q", out, want)
	}
}
