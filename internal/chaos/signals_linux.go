//go:build linux

package chaos

import "syscall"

// procAttr puts a child in a process group of its own (a Ctrl-C reaches
// the harness, which stops the children in order) and kills it if the
// harness dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
