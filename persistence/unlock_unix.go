//go:build unix

package persistence

import (
	"os"
	"syscall"
)

// unlockFile drops the flock bbolt took on f. Closing f is not enough when bbolt panicked
// inside Open after mapping the file: the mapping keeps the locked file open.
func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
