//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
)

// Enabled reports whether this build has failpoints.
const Enabled = true

// Inject pauses forever when this process is armed at this point (see
// Armed), after printing "FAILPOINT <name>" to stderr.
func Inject(name string) {
	if !Armed(name) {
		return
	}
	fmt.Fprintf(os.Stderr, "FAILPOINT %s\n", name)
	select {}
}

// Armed reports whether this process is armed at the named point:
// OUTBOX_FAILPOINT names it, or OUTBOX_FAILPOINT is empty and the file that
// OUTBOX_FAILPOINT_FILE names holds it. The file is read at every call, so a
// test arms a running process by writing it and disarms it by removing it.
func Armed(name string) bool { return armedAt() == name }

func armedAt() string {
	if name := os.Getenv("OUTBOX_FAILPOINT"); name != "" {
		return name
	}
	path := os.Getenv("OUTBOX_FAILPOINT_FILE")
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Announce prints "FAILPOINT <name>" to stderr, for a point that pauses in
// its own way (on the database server, say) rather than in Inject.
func Announce(name string) { fmt.Fprintf(os.Stderr, "FAILPOINT %s\n", name) }
