//go:build !linux

package e2e

import "syscall"

// childAttr puts a child process in a process group of its own (kill signals its group).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
