package e2e

import "syscall"

// childAttr puts a child process in a process group of its own (kill signals its group), and
// has the kernel kill it if the test process dies first (an interrupted `make chaos` or a
// test binary killed on timeout leaves no hub or peer running).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
