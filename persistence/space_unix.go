//go:build unix

package persistence

import (
	"os"
	"path/filepath"
	"syscall"
)

// free returns the bytes this process may still write to the filesystem holding the store:
// the free blocks for root (who may use the blocks a filesystem reserves), the available
// ones for anyone else.
func (b *boltBackend) free() (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(b.path), &st); err != nil {
		return 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return int64(blocks) * int64(st.Bsize), true
}
