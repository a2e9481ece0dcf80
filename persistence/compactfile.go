package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Compacting a store file: giving the disk space of deleted namespaces (and of any other
// removed data) back to the file system. A delete frees its pages at once, and the next
// writes reuse them before the file grows, but the file never shrinks by itself; a copy of
// it without its free pages does. Both functions work on the file of a stopped hub or peer
// (they wait DefaultLockTimeout for its lock, then fail with ErrLocked), check that the copy
// holds exactly what the store holds — every bucket, key and value — and never change the
// store's content.

// compactTxBytes is how much a compaction copies per write transaction.
const compactTxBytes = 64 << 20

// CompactResult is the size of the store file before and of its compacted copy after.
type CompactResult struct {
	Before, After int64
}

// CompactFile copies the store file at src into a new file at dst, leaving out free pages.
// dst must not exist. The store is left as it was; replace it with dst yourself (keep src
// until the new store opened), or use CompactInPlace.
func CompactFile(src, dst string) (CompactResult, error) {
	if _, err := os.Lstat(dst); err == nil {
		return CompactResult{}, fmt.Errorf("persistence: %s exists: give the compacted copy a new file", dst)
	}
	from, err := openToCompact(src, true)
	if err != nil {
		return CompactResult{}, err
	}
	defer from.Close()
	res, err := compactInto(from, dst)
	if err != nil {
		os.Remove(dst)
	}
	return res, err
}

// CompactInPlace replaces the store file at path with a compacted copy of it. It holds the
// store's lock throughout (no hub or peer can open it meanwhile), writes the copy beside it
// (path + ".compacting", removed first if an interrupted compaction left it), checks it and
// renames it over the store: at every moment path is either the old file or the whole new
// one.
func CompactInPlace(path string) (CompactResult, error) {
	from, err := openToCompact(path, false)
	if err != nil {
		return CompactResult{}, err
	}
	defer from.Close()
	tmp := path + ".compacting"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return CompactResult{}, err
	}
	res, err := compactInto(from, tmp)
	if err != nil {
		os.Remove(tmp)
		return res, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync() // the rename survives a power loss
		d.Close()
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// openToCompact opens the store file to copy from: read-only (a shared lock) or, to replace
// it, for writing (the exclusive lock, which keeps every other process out).
func openToCompact(path string, readOnly bool) (*bolt.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: readOnly, Timeout: DefaultLockTimeout, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is in use by a running hub or peer; stop it first", ErrLocked, path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, &CorruptError{Path: path, Reason: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("persistence: open %s: %w", path, err)
	}
	return db, nil
}

// compactInto copies from into a new file at dst and checks the copy. A damaged page that
// makes bbolt panic is a *CorruptError.
func compactInto(from *bolt.DB, dst string) (res CompactResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &CorruptError{Path: from.Path(), Reason: fmt.Sprint(p)}
		}
	}()
	to, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: DefaultLockTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return res, fmt.Errorf("persistence: create %s: %w", dst, err)
	}
	defer to.Close()
	if err := bolt.Compact(to, from, compactTxBytes); err != nil {
		return res, fmt.Errorf("persistence: compacting %s: %w", from.Path(), err)
	}
	if err := sameContent(from, to); err != nil {
		return res, fmt.Errorf("persistence: the compacted copy of %s differs from it (%v); the store is left as it was", from.Path(), err)
	}
	err = from.View(func(tx *bolt.Tx) error {
		res.Before = tx.Size()
		return nil
	})
	if err != nil {
		return res, err
	}
	err = to.View(func(tx *bolt.Tx) error {
		res.After = tx.Size()
		return nil
	})
	if err != nil {
		return res, err
	}
	return res, to.Close()
}

// sameContent checks that a and b hold the same buckets, keys and values.
func sameContent(a, b *bolt.DB) error {
	return a.View(func(ta *bolt.Tx) error {
		return b.View(func(tb *bolt.Tx) error {
			ca, cb := ta.Cursor(), tb.Cursor()
			ka, _ := ca.First()
			kb, _ := cb.First()
			for ; ka != nil || kb != nil; ka, kb = nextKey(ca), nextKey(cb) {
				if !bytes.Equal(ka, kb) {
					return fmt.Errorf("top bucket %q against %q", ka, kb)
				}
				if err := sameBucket(ta.Bucket(ka), tb.Bucket(kb), string(ka)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func nextKey(c *bolt.Cursor) []byte {
	k, _ := c.Next()
	return k
}

// sameBucket compares two buckets, their nested buckets included.
func sameBucket(a, b *bolt.Bucket, path string) error {
	if a == nil || b == nil {
		if a != b {
			return fmt.Errorf("bucket %s missing on one side", path)
		}
		return nil
	}
	ca, cb := a.Cursor(), b.Cursor()
	ka, va := ca.First()
	kb, vb := cb.First()
	for ka != nil || kb != nil {
		if !bytes.Equal(ka, kb) {
			return fmt.Errorf("in %s: key %q against %q", path, ka, kb)
		}
		if va == nil || vb == nil { // nested buckets
			if va != nil || vb != nil {
				return fmt.Errorf("in %s: %q is a bucket on one side only", path, ka)
			}
			if err := sameBucket(a.Bucket(ka), b.Bucket(kb), path+"/"+string(ka)); err != nil {
				return err
			}
		} else if !bytes.Equal(va, vb) {
			return fmt.Errorf("in %s: the value of %q differs", path, ka)
		}
		ka, va = ca.Next()
		kb, vb = cb.Next()
	}
	return nil
}
