package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The change feed and the versions in the bbolt file (BoltStore's layout):
//
//	changes/<cursor>                 a change-feed record (cursor: 8 bytes big endian; the
//	                                 bucket's sequence is the newest cursor ever given)
//	changes-latest/<ns>              the newest record of each namespace
//	versions/<ns>/info/<id>          a version (id: 8 bytes big endian; the namespace
//	versions/<ns>/state/<id>         bucket's sequence is the newest id) and its state
//
// These buckets came after the first stores: a store that lacks them gets them when it is
// opened for writing (addedBuckets); one opened read-only reads as if they were empty.
var (
	bucketChanges       = []byte("changes")
	bucketChangesLatest = []byte("changes-latest")
	bucketVersions      = []byte("versions")
	addedBuckets        = [][]byte{bucketChanges, bucketChangesLatest, bucketVersions}

	keyState = []byte("state")
)

// addBuckets creates the buckets a store made by an earlier version lacks.
func (b *boltBackend) addBuckets() error {
	if b.readOnly {
		return nil
	}
	missing := false
	err := b.guard(false, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			for _, name := range addedBuckets {
				if tx.Bucket(name) == nil {
					missing = true
				}
			}
			return nil
		})
	})
	if err != nil || !missing {
		return err
	}
	return b.guard(true, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			for _, name := range addedBuckets {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

var changesScope = []byte("changes")

// ---- reader ----

func (t *boltTx) changeBounds() (ChangeBounds, error) {
	cb := t.tx.Bucket(bucketChanges)
	if cb == nil {
		return ChangeBounds{}, nil
	}
	b := ChangeBounds{Head: cb.Sequence()}
	k, _ := cb.Cursor().First()
	switch {
	case k == nil:
		b.PrunedThrough = b.Head
	case len(k) != 8:
		return ChangeBounds{}, t.b.corrupt("changes", fmt.Errorf("bad key %x", k))
	default:
		b.PrunedThrough = binary.BigEndian.Uint64(k) - 1
	}
	return b, nil
}

func (t *boltTx) decodeChange(k, v []byte) (Change, error) {
	if len(k) != 8 {
		return Change{}, t.b.corrupt("changes", fmt.Errorf("bad key %x", k))
	}
	cursor := binary.BigEndian.Uint64(k)
	where := fmt.Sprintf("changes/%d", cursor)
	p, err := decodeRecord(changesScope, k, recChange, v)
	if err != nil {
		return Change{}, t.b.corrupt(where, err)
	}
	c, err := decodeChangePayload(p, cursor)
	if err != nil {
		return Change{}, t.b.corrupt(where, err)
	}
	return c, nil
}

func (t *boltTx) changes(after uint64, limit int) ([]Change, error) {
	cb := t.tx.Bucket(bucketChanges)
	if cb == nil {
		return nil, nil
	}
	var out []Change
	c := cb.Cursor()
	for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
		ch, err := t.decodeChange(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, nil
}

func (t *boltTx) latestChanges(fn func(Change) error) error {
	lb := t.tx.Bucket(bucketChangesLatest)
	if lb == nil {
		return nil
	}
	return lb.ForEach(func(k, v []byte) error {
		p, err := decodeRecord(changesScope, k, recChangeLatest, v)
		if err != nil {
			return t.b.corrupt("changes-latest/"+string(k), err)
		}
		c, err := decodeLatestPayload(p)
		if err != nil {
			return t.b.corrupt("changes-latest/"+string(k), err)
		}
		return fn(c)
	})
}

func versionsWhere(ns string, id uint64) string { return fmt.Sprintf("versions/%s/%d", ns, id) }

func versionScope(ns string) []byte { return append([]byte("versions/"), ns...) }

func (t *boltTx) versions(ns string) ([]Version, error) {
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil {
		return nil, nil
	}
	nb := vb.Bucket([]byte(ns))
	if nb == nil {
		return nil, nil
	}
	ib := nb.Bucket(keyInfo)
	if ib == nil {
		return nil, t.b.corrupt("versions/"+ns, fmt.Errorf("missing info bucket"))
	}
	var out []Version
	err := ib.ForEach(func(k, v []byte) error {
		ver, err := t.decodeVersion(ns, k, v)
		out = append(out, ver)
		return err
	})
	return out, err
}

func (t *boltTx) decodeVersion(ns string, k, v []byte) (Version, error) {
	if len(k) != 8 {
		return Version{}, t.b.corrupt("versions/"+ns, fmt.Errorf("bad key %x", k))
	}
	id := binary.BigEndian.Uint64(k)
	p, err := decodeRecord(versionScope(ns), k, recVersionInfo, v)
	if err != nil {
		return Version{}, t.b.corrupt(versionsWhere(ns, id), err)
	}
	ver, err := decodeVersionPayload(p, ns, id)
	if err != nil {
		return Version{}, t.b.corrupt(versionsWhere(ns, id), err)
	}
	return ver, nil
}

func (t *boltTx) version(ns string, id uint64) (Version, []byte, error) {
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil {
		return Version{}, nil, ErrNotFound
	}
	nb := vb.Bucket([]byte(ns))
	if nb == nil {
		return Version{}, nil, ErrNotFound
	}
	ib, sb := nb.Bucket(keyInfo), nb.Bucket(keyState)
	if ib == nil || sb == nil {
		return Version{}, nil, t.b.corrupt("versions/"+ns, fmt.Errorf("missing info or state bucket"))
	}
	k := seqKey(id)
	v := ib.Get(k)
	if v == nil {
		return Version{}, nil, ErrNotFound
	}
	ver, err := t.decodeVersion(ns, k, v)
	if err != nil {
		return Version{}, nil, err
	}
	p, err := decodeRecord(versionScope(ns), k, recVersionState, sb.Get(k))
	if err != nil {
		return Version{}, nil, t.b.corrupt(versionsWhere(ns, id)+"/state", err)
	}
	if len(p) != ver.StateBytes {
		return Version{}, nil, t.b.corrupt(versionsWhere(ns, id)+"/state", fmt.Errorf("%d bytes, the version says %d", len(p), ver.StateBytes))
	}
	return ver, bytes.Clone(p), nil
}

// ---- writer ----

func (t *boltTx) putChange(c Change) (uint64, error) {
	cb, lb := t.tx.Bucket(bucketChanges), t.tx.Bucket(bucketChangesLatest)
	if cb == nil || lb == nil {
		return 0, t.b.corrupt("changes", fmt.Errorf("missing bucket"))
	}
	cursor, err := cb.NextSequence()
	if err != nil {
		return 0, err
	}
	c.Cursor = cursor
	k := seqKey(cursor)
	cb.FillPercent = logFill
	if err := cb.Put(k, encodeRecord(changesScope, k, recChange, appendChangePayload(nil, c))); err != nil {
		return 0, err
	}
	nk := []byte(c.NamespaceID)
	return cursor, lb.Put(nk, encodeRecord(changesScope, nk, recChangeLatest, encodeLatestPayload(c)))
}

func (t *boltTx) pruneChanges(before time.Time, keep, limit int) error {
	cb := t.tx.Bucket(bucketChanges)
	if cb == nil {
		return nil
	}
	head := cb.Sequence()
	c := cb.Cursor()
	var drop [][]byte
	for k, v := c.First(); k != nil && len(drop) < limit; k, v = c.Next() {
		ch, err := t.decodeChange(k, v)
		if err != nil {
			return err
		}
		kept := head - ch.Cursor + 1 // records from this one on
		if (keep >= 0 && kept > uint64(keep)) || (!before.IsZero() && ch.At.Before(before)) {
			drop = append(drop, bytes.Clone(k))
			continue
		}
		break
	}
	for _, k := range drop {
		if err := cb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *boltTx) putVersion(v Version, state []byte) (uint64, error) {
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil {
		return 0, t.b.corrupt("versions", fmt.Errorf("missing bucket"))
	}
	nb, err := vb.CreateBucketIfNotExists([]byte(v.NamespaceID))
	if err != nil {
		return 0, err
	}
	ib, err := nb.CreateBucketIfNotExists(keyInfo)
	if err != nil {
		return 0, err
	}
	sb, err := nb.CreateBucketIfNotExists(keyState)
	if err != nil {
		return 0, err
	}
	id, err := nb.NextSequence()
	if err != nil {
		return 0, err
	}
	k, scope := seqKey(id), versionScope(v.NamespaceID)
	if err := ib.Put(k, encodeRecord(scope, k, recVersionInfo, encodeVersionPayload(v))); err != nil {
		return 0, err
	}
	return id, sb.Put(k, encodeRecord(scope, k, recVersionState, state))
}

func (t *boltTx) deleteVersion(ns string, id uint64) error {
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil {
		return nil
	}
	nb := vb.Bucket([]byte(ns))
	if nb == nil {
		return nil
	}
	k := seqKey(id)
	for _, name := range [][]byte{keyInfo, keyState} {
		if b := nb.Bucket(name); b != nil {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *boltTx) deleteVersions(ns string) error {
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil || vb.Bucket([]byte(ns)) == nil {
		return nil
	}
	return vb.DeleteBucket([]byte(ns))
}

// verifyFeed checks every record of the change feed and of the versions.
func (t *boltTx) verifyFeed() error {
	if cb := t.tx.Bucket(bucketChanges); cb != nil {
		if err := cb.ForEach(func(k, v []byte) error { _, err := t.decodeChange(k, v); return err }); err != nil {
			return err
		}
	}
	if err := t.latestChanges(func(Change) error { return nil }); err != nil {
		return err
	}
	vb := t.tx.Bucket(bucketVersions)
	if vb == nil {
		return nil
	}
	return vb.ForEachBucket(func(ns []byte) error {
		list, err := t.versions(string(ns))
		if err != nil {
			return err
		}
		for _, v := range list {
			if _, _, err := t.version(string(ns), v.ID); err != nil {
				return err
			}
		}
		return nil
	})
}
