//go:build linux

package ws

import (
	"math"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpAckedBytes reports how many of the bytes written to the TCP socket raw the remote's TCP
// has acknowledged (tcpi_bytes_acked), and whether the system told. A kernel older than
// 4.1 fills a shorter tcp_info and leaves the field at zero, which reads as no progress: the
// same as not knowing.
func tcpAckedBytes(raw syscall.RawConn) (int64, bool) {
	var (
		info *unix.TCPInfo
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return int64(min(info.Bytes_acked, math.MaxInt64)), true
}
