//go:build unix

package node

import (
	"os"
	"syscall"
)

// freeBytes is the room left for this process on the filesystem holding dir.
func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return int64(blocks) * int64(st.Bsize), true
}
