//go:build !unix

package chaos

import (
	"os"
	"syscall"
)

// supported reports whether the harness can run here: not without SIGSTOP
// and SIGCONT.
const supported = false

var (
	sigStop os.Signal = os.Interrupt
	sigCont os.Signal = os.Interrupt
	sigTerm os.Signal = os.Interrupt
)

func procAttr() *syscall.SysProcAttr { return nil }
