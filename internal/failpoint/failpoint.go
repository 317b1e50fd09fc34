//go:build !failpoints

// Package failpoint lets crash tests stop a real relay process at a named
// point. In normal builds Inject does nothing and compiles away; a binary
// built with -tags failpoints pauses at the point named by the environment
// variable OUTBOX_FAILPOINT, after printing "FAILPOINT <name>" to stderr, so
// that a test can kill it there with SIGKILL.
package failpoint

// Enabled reports whether this build has failpoints.
const Enabled = false

// Inject is a named point where a failpoint build may pause.
func Inject(name string) {}
