//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
)

// Enabled reports whether this build has failpoints.
const Enabled = true

// Inject pauses forever when OUTBOX_FAILPOINT names this point, after
// printing "FAILPOINT <name>" to stderr.
func Inject(name string) {
	if os.Getenv("OUTBOX_FAILPOINT") != name {
		return
	}
	fmt.Fprintf(os.Stderr, "FAILPOINT %s\n", name)
	select {}
}

// Armed reports whether OUTBOX_FAILPOINT names this point.
func Armed(name string) bool { return os.Getenv("OUTBOX_FAILPOINT") == name }

// Announce prints "FAILPOINT <name>" to stderr, for a point that pauses in
// its own way (on the database server, say) rather than in Inject.
func Announce(name string) { fmt.Fprintf(os.Stderr, "FAILPOINT %s\n", name) }
