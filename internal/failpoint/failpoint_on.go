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
