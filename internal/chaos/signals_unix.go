//go:build unix

package chaos

import (
	"os"
	"syscall"
)

// supported reports whether the harness can run here: it pauses and
// resumes processes with SIGSTOP and SIGCONT.
const supported = true

var (
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
	sigTerm os.Signal = syscall.SIGTERM
)
