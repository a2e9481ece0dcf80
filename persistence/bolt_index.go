package persistence

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// The bbolt backend's part of names.go. The index lives in the top bucket index/, beside
// entries/; a store written before it existed gets it, built from the entries, the first
// time it is opened for writing (ensureIndex).

var bucketIndex = []byte("index")

// ensureIndex creates and fills the index bucket of a store that has none.
func (b *boltBackend) ensureIndex() error {
	if b.readOnly {
		return nil
	}
	missing := false
	err := b.guard(false, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			missing = tx.Bucket(bucketIndex) == nil
			return nil
		})
	})
	if err != nil || !missing {
		return err
	}
	return b.update(func(w writer) error {
		if _, err := w.(*boltTx).tx.CreateBucketIfNotExists(bucketIndex); err != nil {
			return err
		}
		return rebuildIndex(w)
	})
}

// index is the index bucket; nil in a store opened read-only that was written before it
// existed (which then lists nothing through the index).
func (t *boltTx) index() *bolt.Bucket { return t.tx.Bucket(bucketIndex) }

func (t *boltTx) entryScan(after string, fn func(Entry) (bool, error)) error {
	c := t.top(bucketEntries).Cursor()
	k, v := c.Seek([]byte(after))
	if k != nil && string(k) == after {
		k, v = c.Next()
	}
	for ; k != nil; k, v = c.Next() {
		e, err := t.decodeEntry(k, v)
		if err != nil {
			return err
		}
		if more, err := fn(e); err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *boltTx) indexGet(key []byte) ([]byte, error) {
	ib := t.index()
	if ib == nil {
		return nil, nil
	}
	return bytes.Clone(ib.Get(key)), nil
}

func (t *boltTx) indexScan(prefix, from []byte, fn func(key, value []byte) (bool, error)) error {
	ib := t.index()
	if ib == nil {
		return nil
	}
	c := ib.Cursor()
	var k, v []byte
	if len(from) == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if more, err := fn(k, v); err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *boltTx) indexPut(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return t.index().Put(key, value)
}

func (t *boltTx) indexDelete(key []byte) error { return t.index().Delete(key) }

func (t *boltTx) indexClear() error {
	if t.index() != nil {
		if err := t.tx.DeleteBucket(bucketIndex); err != nil {
			return err
		}
	}
	_, err := t.tx.CreateBucket(bucketIndex)
	return err
}

// deleteDoc removes the document of (owner, ns). bbolt frees the pages of the removed
// buckets when the transaction commits: later writes reuse them (FreeBytes counts them);
// the file itself shrinks only when it is compacted into a new one (CompactFile,
// CompactInPlace; nmcr store compact).
func (t *boltTx) deleteDoc(owner, ns string) error {
	ob := t.top(bucketDocs).Bucket([]byte(owner))
	if ob == nil || ob.Bucket([]byte(ns)) == nil {
		return nil
	}
	delete(t.logs, docKey{owner, ns})
	return ob.DeleteBucket([]byte(ns))
}

// FreeBytes returns the bytes of the store file's free pages: pages of removed data that the
// next writes reuse before the file grows (a deleted namespace's document lands here once no
// read transaction needs it any more), and the file's size. A store opened read-only does
// not read bbolt's freelist and reports 0 free bytes.
func (s *BoltStore) FreeBytes() (free, file int64, err error) {
	err = s.b.guard(false, func() error {
		st := s.b.db.Stats()
		free = int64(st.FreePageN+st.PendingPageN) * int64(s.b.db.Info().PageSize)
		return s.b.db.View(func(tx *bolt.Tx) error {
			file = tx.Size()
			return nil
		})
	})
	return free, file, err
}
