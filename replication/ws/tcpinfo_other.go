//go:build !linux

package ws

import "syscall"

// tcpAckedBytes reports nothing on this system: liveness counts only the bytes that cross
// the socket (see liveness).
func tcpAckedBytes(syscall.RawConn) (int64, bool) { return 0, false }
