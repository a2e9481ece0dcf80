//go:build !unix

package persistence

import "os"

func unlockFile(*os.File) {}
