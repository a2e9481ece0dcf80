// Package smallfs gives tests a small filesystem of their own, to fill up: a tmpfs of a
// given size mounted on a temporary directory. Mounting needs the privilege to mount (root,
// or CAP_SYS_ADMIN): without it the test is skipped loudly — or fails, when
// NOMICORE_REQUIRE_SMALLFS=1 says the machine can.
package smallfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// RequireEnv, set to 1, makes a test that cannot mount its filesystem fail instead of skip.
const RequireEnv = "NOMICORE_REQUIRE_SMALLFS"

// Mount mounts a tmpfs of size bytes on a new temporary directory and returns it; the
// filesystem is unmounted when the test ends (after the cleanups registered later, such as
// those that stop the processes using it).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := mount(dir, size); err != nil {
		msg := fmt.Sprintf("cannot mount a %d-byte tmpfs for the test (%v): it needs root or CAP_SYS_ADMIN", size, err)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg + " (set " + RequireEnv + "=1 to fail instead)")
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file in dir until the filesystem holding dir is full, and returns its path:
// removing it gives the space back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	for { // the last pages, a byte at a time
		if _, err := f.Write(chunk[:1]); err != nil {
			break
		}
	}
	return path
}
