//go:build unix && !linux

package chaos

import "syscall"

// procAttr puts a child in a process group of its own, so that a Ctrl-C
// reaches the harness, which stops the children in order.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
