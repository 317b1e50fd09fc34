//go:build !failpoints

// Package failpoint lets crash tests stop a real relay process at a named
// point. In normal builds Inject does nothing and compiles away; a binary
// built with -tags failpoints pauses at the point named by the environment
// variable OUTBOX_FAILPOINT (or, while it is empty, in the file that
// OUTBOX_FAILPOINT_FILE names, read at each point so that a running process
// can be armed), after printing "FAILPOINT <name>" to stderr, so that a test
// can kill it there with SIGKILL.
package failpoint

// Enabled reports whether this build has failpoints.
const Enabled = false

// Inject is a named point where a failpoint build may pause.
func Inject(name string) {}

// Armed reports whether this process was asked to stop at the named point.
// Always false in normal builds.
func Armed(name string) bool { return false }

// Announce prints "FAILPOINT <name>" in failpoint builds, for a point that
// pauses in its own way (on the database server, say) rather than in
// Inject. It does nothing in normal builds.
func Announce(name string) {}
