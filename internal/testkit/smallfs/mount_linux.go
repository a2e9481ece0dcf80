package smallfs

import (
	"fmt"
	"syscall"
)

func mount(dir string, size int64) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size))
}
