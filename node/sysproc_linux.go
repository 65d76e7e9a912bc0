package node

import "syscall"

// sysProcAttr makes the kernel kill the server if the test process dies
// without cleaning up (a test timeout, a SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
