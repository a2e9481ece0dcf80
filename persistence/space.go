package persistence

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// A full disk. bbolt grows its file as the store grows, and a commit that needs a page the
// filesystem cannot give fails with ENOSPC (or EDQUOT: the user's quota) without changing
// the file: the transaction is all or nothing. The store then reports itself unhealthy
// (Healthy, Options.OnHealthChange, with a *NoSpaceError), keeps the appends it could not
// write queued, and tries again with backoff — so it takes writes again by itself once
// there is room, with nothing lost. A write of the calling goroutine (an entry, a
// configuration value) that fails this way fails, makes the store unhealthy too, and the
// committer probes the store until a write succeeds again (probe.go).

// ErrNoSpace: a write failed because the filesystem holding the store is full, or the
// user's quota is used up. Nothing of that write is on disk. See NoSpaceError.
var ErrNoSpace = errors.New("persistence: no space left for the store")

// NoSpaceError is a write that failed for lack of space. It unwraps to ErrNoSpace and to the
// filesystem's error.
type NoSpaceError struct {
	Path string // the store file
	Err  error
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("persistence: the filesystem holding %s has no space left for the store's write: %v", e.Path, e.Err)
}

func (e *NoSpaceError) Unwrap() []error { return []error{ErrNoSpace, e.Err} }

// noSpace reports whether err is the filesystem's "no space left" or "quota exceeded".
// bbolt wraps the errors of its writes, but formats a failed resize of the file as text.
func noSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "no space left on device") || strings.Contains(s, "disk quota exceeded")
}
