//go:build unix

package main

import "syscall"

// readUsage is getrusage(RUSAGE_SELF): CPU time in user and system mode, and the peak
// resident set (kilobytes on Linux).
func readUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return usage{UserMs: ms(ru.Utime), SysMs: ms(ru.Stime), MaxRSSKB: ru.Maxrss}
}
