package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the store file inside an instance's data directory.
const FileName = "nomicore.db"

// BoltStore is the Store both binaries use: one bbolt file per instance. Layout (bucket
// paths; every value is a checked record, see record.go):
//
//	meta/format                       format marker
//	config/<key>                      host configuration values
//	entries/<ns>                      registry entries
//	docs/<owner>/<ns>/snapshot/snapshot  through + snapshot bytes
//	docs/<owner>/<ns>/log/<seq>          updates after the snapshot (seq: 8 bytes big endian)
//	archives/<ns>/<id>/info              reason + the entry as it was
//	archives/<ns>/<id>/snapshot, log     the document as it was (absent when there was none)
//	index/<key>                       the catalog's indexes by owner, name and label (names.go)
//
// The snapshot record sits alone in a bucket of its own: a bbolt commit rewrites every
// node it touches whole, and appending to the log touches the document bucket (the log's
// root moves), so a snapshot stored beside the log would be rewritten by every commit.
type BoltStore struct {
	*engine
	b *boltBackend
}

var _ Store = (*BoltStore)(nil)

// OpenDataDir opens (creating it if needed) the store of the instance whose data directory is
// dir: dir/nomicore.db.
func OpenDataDir(dir string, opts Options) (*BoltStore, error) {
	if !opts.ReadOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("persistence: data dir: %w", err)
		}
	}
	return OpenBolt(filepath.Join(dir, FileName), opts)
}

// OpenBolt opens (creating it unless opts.ReadOnly) the store file at path. It waits at most
// opts.LockTimeout for the file lock and then fails with ErrLocked; a damaged file fails with
// a *CorruptError naming it.
func OpenBolt(path string, opts Options) (*BoltStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := openBackend(path, opts)
	if err != nil {
		return nil, err
	}
	return &BoltStore{engine: newEngine(b, opts), b: b}, nil
}

// Path returns the store file.
func (s *BoltStore) Path() string { return s.b.path }

// Verify reads every record of the store and checks it (magic, version, checksum, payload,
// gapless logs). It returns nil or the problems found, each a *CorruptError.
func (s *BoltStore) Verify(ctx context.Context) error {
	return s.view(ctx, func(r reader) error { return r.(*boltTx).verify() })
}

var (
	bucketMeta     = []byte("meta")
	bucketConfig   = []byte("config")
	bucketEntries  = []byte("entries")
	bucketDocs     = []byte("docs")
	bucketArchives = []byte("archives")
	topBuckets     = [][]byte{bucketMeta, bucketConfig, bucketEntries, bucketDocs, bucketArchives}

	keyFormat   = []byte("format")
	keySnapshot = []byte("snapshot")
	keyLog      = []byte("log")
	keyInfo     = []byte("info")
	keyProbe    = []byte("probe")
)

// logFill: log keys only ever grow, so pages are filled before they split.
const logFill = 0.9

// initialMmapSize is how much of the file bbolt maps at once from the start: a commit that
// needs more mapped must wait until every read transaction ends, and a backup is a read
// transaction as long as the copy. Mapping 1 GiB of address space (not memory: only the
// pages read are loaded) from the start means a store below 1 GiB never waits for a backup;
// above, bbolt maps 1 GiB more at a time. Not on Windows, where bbolt grows the file itself
// to the mapped size, nor with 32-bit addresses.
var initialMmapSize = func() int {
	if runtime.GOOS == "windows" || strconv.IntSize < 64 {
		return 0
	}
	return 1 << 30
}()

type boltBackend struct {
	db       *bolt.DB
	file     *os.File // bbolt's file, to release it when bbolt cannot
	path     string
	readOnly bool
	// poisoned holds the error of a write transaction that panicked: bbolt's state is then
	// unknown, so every later transaction fails with it.
	poisoned atomic.Pointer[CorruptError]
}

func openBackend(path string, opts Options) (b *boltBackend, err error) {
	b = &boltBackend{path: path, readOnly: opts.ReadOnly}
	err = b.guard(true, func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{
			Timeout:         opts.LockTimeout,
			ReadOnly:        opts.ReadOnly,
			InitialMmapSize: initialMmapSize,
			FreelistType:    bolt.FreelistMapType,
			// The freelist is synced: rebuilding it on open would walk every page on a
			// goroutine of bbolt's where a damaged page cannot be recovered from.
			NoFreelistSync: false,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				b.file = f
				return f, err
			},
		})
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("%w: data dir %s is in use by another process (no lock on %s within %v)",
				ErrLocked, filepath.Dir(path), filepath.Base(path), opts.LockTimeout)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return &CorruptError{Path: path, Reason: err.Error()}
		case err != nil:
			return fmt.Errorf("persistence: open %s: %w", path, err)
		}
		b.db = db
		return nil
	})
	if err == nil {
		err = b.checkFormat()
	}
	if err == nil {
		err = b.addBuckets()
	}
	if err == nil {
		err = b.ensureIndex()
	}
	if err != nil {
		if b.db != nil {
			b.db.Close()
		} else if b.file != nil {
			b.releaseFile() // bbolt panicked inside Open
		}
		return nil, err
	}
	return b, nil
}

// checkFormat creates the buckets of a new store, or checks the format marker of an existing
// one.
func (b *boltBackend) checkFormat() error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return &CorruptError{Path: b.path, Reason: "not a Nomicore store (no meta bucket)"}
		}
		p, err := decodeRecord(nil, keyFormat, recFormat, meta.Get(keyFormat))
		if err != nil {
			return b.corrupt("meta/format", err)
		}
		if err := parseFormat(b.path, p); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return fe
			}
			return b.corrupt("meta/format", err)
		}
		for _, name := range topBuckets {
			if tx.Bucket(name) == nil {
				return b.corrupt(string(name), errors.New("missing bucket"))
			}
		}
		return nil
	}
	// Check in a read transaction (it reads the file in place); write only to set up a new,
	// empty file.
	empty := false
	err := b.guard(false, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if k, _ := tx.Cursor().First(); k == nil {
				empty = true
				return nil
			}
			return check(tx)
		})
	})
	if err != nil || !empty {
		return err
	}
	if b.readOnly {
		return &CorruptError{Path: b.path, Reason: "not a Nomicore store (empty)"}
	}
	return b.guard(true, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			if k, _ := tx.Cursor().First(); k != nil {
				return check(tx)
			}
			for _, name := range append(topBuckets, addedBuckets...) {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(keyFormat, encodeRecord(nil, keyFormat, recFormat, []byte(formatName)))
		})
	})
}

// guard runs fn, turning a panic of bbolt (or a memory fault, on a damaged or truncated file)
// into a *CorruptError naming the file.
func (b *boltBackend) guard(write bool, fn func() error) (err error) {
	if p := b.poisoned.Load(); p != nil {
		return p
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			ce := &CorruptError{Path: b.path, Reason: fmt.Sprintf("bbolt failed reading the file: %v", p)}
			if write {
				b.poisoned.Store(ce)
			}
			err = ce
		}
	}()
	return fn()
}

func (b *boltBackend) corrupt(where string, err error) error {
	return &CorruptError{Path: b.path, Where: where, Reason: err.Error()}
}

func (b *boltBackend) view(fn func(r reader) error) error {
	return b.guard(false, func() error {
		return b.db.View(func(tx *bolt.Tx) error { return fn(&boltTx{b: b, tx: tx}) })
	})
}

func (b *boltBackend) update(fn func(w writer) error) error {
	if b.readOnly {
		return ErrReadOnly
	}
	err := b.guard(true, func() error {
		return b.db.Update(func(tx *bolt.Tx) error { return fn(&boltTx{b: b, tx: tx}) })
	})
	if noSpace(err) {
		return &NoSpaceError{Path: b.path, Err: err}
	}
	return err
}

// releaseFile unlocks and closes bbolt's file without bbolt, which is stuck after a panic
// (its locks may be held). Its memory map of the damaged file, if made, stays until the
// process exits.
func (b *boltBackend) releaseFile() {
	unlockFile(b.file)
	b.file.Close()
}

func (b *boltBackend) close() error {
	if b.db == nil {
		return nil
	}
	if b.poisoned.Load() != nil {
		b.releaseFile()
		return nil
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("persistence: close %s: %w", b.path, err)
	}
	return nil
}

// boltTx is one bbolt transaction seen as a reader or writer.
type boltTx struct {
	b    *boltBackend
	tx   *bolt.Tx
	logs map[docKey]*bolt.Bucket // log buckets opened by this write transaction
}

func (t *boltTx) top(name []byte) *bolt.Bucket { return t.tx.Bucket(name) } // checked on open

func docWhere(owner, ns string) string { return "docs/" + owner + "/" + ns }

func archiveWhere(ns string, id uint64) string {
	return "archives/" + ns + "/" + strconv.FormatUint(id, 10)
}

func (t *boltTx) docBucket(owner, ns string) *bolt.Bucket {
	ob := t.top(bucketDocs).Bucket([]byte(owner))
	if ob == nil {
		return nil
	}
	return ob.Bucket([]byte(ns))
}

// ---- reader ----

func (t *boltTx) entry(ns string) (Entry, error) {
	k := []byte(ns)
	v := t.top(bucketEntries).Get(k)
	if v == nil {
		return Entry{}, ErrNotFound
	}
	return t.decodeEntry(k, v)
}

func (t *boltTx) decodeEntry(k, v []byte) (Entry, error) {
	where := "entries/" + string(k)
	p, err := decodeRecord(nil, k, recEntry, v)
	if err != nil {
		return Entry{}, t.b.corrupt(where, err)
	}
	e, err := decodeEntryPayload(p, string(k))
	if err != nil {
		return Entry{}, t.b.corrupt(where, err)
	}
	return e, nil
}

func (t *boltTx) entries(owner string) ([]Entry, error) {
	var out []Entry
	err := t.top(bucketEntries).ForEach(func(k, v []byte) error {
		e, err := t.decodeEntry(k, v)
		if err != nil {
			return err
		}
		if owner == "" || e.Owner == owner {
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// readSnapshot decodes the snapshot record of the document bucket db (aliasing the page).
func (t *boltTx) readSnapshot(db *bolt.Bucket, scope []byte, where string) (uint64, []byte, error) {
	sb := db.Bucket(keySnapshot)
	if sb == nil {
		return 0, nil, t.b.corrupt(where+"/snapshot", errors.New("missing snapshot bucket"))
	}
	p, err := decodeRecord(scope, keySnapshot, recSnapshot, sb.Get(keySnapshot))
	if err != nil {
		return 0, nil, t.b.corrupt(where+"/snapshot", err)
	}
	through, snap, err := decodeSnapshotPayload(p)
	if err != nil {
		return 0, nil, t.b.corrupt(where+"/snapshot", err)
	}
	return through, snap, nil
}

// eachLogged calls fn for every update in the log of the document bucket db, checking each
// record and that the sequence numbers run on from through without a gap.
func (t *boltTx) eachLogged(db *bolt.Bucket, scope []byte, where string, through uint64, fn func(seq uint64, update []byte)) (uint64, error) {
	lb := db.Bucket(keyLog)
	if lb == nil {
		return 0, t.b.corrupt(where, errors.New("missing log bucket"))
	}
	last := through
	c := lb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || v == nil {
			return 0, t.b.corrupt(where+"/log", fmt.Errorf("bad log key %x", k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq != last+1 {
			return 0, t.b.corrupt(where+"/log", fmt.Errorf("update %d follows %d: the log has a gap", seq, last))
		}
		p, err := decodeRecord(scope, k, recUpdate, v)
		if err != nil {
			return 0, t.b.corrupt(where+"/log/"+strconv.FormatUint(seq, 10), err)
		}
		fn(seq, p)
		last = seq
	}
	return last, nil
}

func (t *boltTx) readDoc(db *bolt.Bucket, scope []byte, where string) (Doc, error) {
	through, snap, err := t.readSnapshot(db, scope, where)
	if err != nil {
		return Doc{}, err
	}
	doc := Doc{Snapshot: bytes.Clone(snap), SnapshotThrough: through}
	// One allocation for all updates: size the log first (values are in the memory map).
	count, size := 0, 0
	lb := db.Bucket(keyLog)
	if lb != nil {
		c := lb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			count++
			size += max(0, len(v)-recHeader)
		}
	}
	arena := make([]byte, 0, size)
	doc.Updates = make([][]byte, 0, count)
	doc.Through, err = t.eachLogged(db, scope, where, through, func(_ uint64, u []byte) {
		if len(arena)+len(u) > cap(arena) { // cannot happen in one transaction; stay safe
			arena = make([]byte, 0, len(u))
		}
		start := len(arena)
		arena = append(arena, u...)
		doc.Updates = append(doc.Updates, arena[start:len(arena):len(arena)])
	})
	if err != nil {
		return Doc{}, err
	}
	return doc, nil
}

func (t *boltTx) readDocInfo(db *bolt.Bucket, scope []byte, where string, info *DocInfo) error {
	through, snap, err := t.readSnapshot(db, scope, where)
	if err != nil {
		return err
	}
	info.HasDoc, info.SnapshotBytes, info.SnapshotThrough = true, len(snap), through
	info.Through, err = t.eachLogged(db, scope, where, through, func(_ uint64, u []byte) {
		info.LogUpdates++
		info.LogBytes += len(u)
	})
	return err
}

func (t *boltTx) doc(owner, ns string) (Doc, error) {
	db := t.docBucket(owner, ns)
	if db == nil {
		return Doc{}, ErrNotFound
	}
	return t.readDoc(db, docScope(owner, ns), docWhere(owner, ns))
}

func (t *boltTx) docInfo(owner, ns string) (DocInfo, error) {
	info := DocInfo{Owner: owner, NamespaceID: ns}
	if db := t.docBucket(owner, ns); db != nil {
		if err := t.readDocInfo(db, docScope(owner, ns), docWhere(owner, ns), &info); err != nil {
			return DocInfo{}, err
		}
	}
	return info, nil
}

func (t *boltTx) docs() ([]DocInfo, error) {
	var out []DocInfo
	docs := t.top(bucketDocs)
	err := docs.ForEachBucket(func(owner []byte) error {
		ob := docs.Bucket(owner)
		return ob.ForEachBucket(func(ns []byte) error {
			info, err := t.docInfo(string(owner), string(ns))
			out = append(out, info)
			return err
		})
	})
	return out, err
}

func (t *boltTx) archives(ns string) ([]ArchiveInfo, error) {
	var out []ArchiveInfo
	all := t.top(bucketArchives)
	each := func(nsKey []byte) error {
		nb := all.Bucket(nsKey)
		if nb == nil {
			return nil
		}
		return nb.ForEachBucket(func(idKey []byte) error {
			info, err := t.archiveInfo(string(nsKey), idKey, nb.Bucket(idKey))
			out = append(out, info)
			return err
		})
	}
	if ns != "" {
		return out, each([]byte(ns))
	}
	return out, all.ForEachBucket(each)
}

func (t *boltTx) archiveInfo(ns string, idKey []byte, ab *bolt.Bucket) (ArchiveInfo, error) {
	info, err := t.archiveHeader(ns, idKey, ab)
	if err != nil {
		return ArchiveInfo{}, err
	}
	if ab.Bucket(keySnapshot) != nil {
		if err := t.readDocInfo(ab, docScope(info.Entry.Owner, ns), archiveWhere(ns, info.ID), &info.DocInfo); err != nil {
			return ArchiveInfo{}, err
		}
	}
	return info, nil
}

// archiveHeader decodes an archive's info record: ArchiveInfo without the document's sizes.
func (t *boltTx) archiveHeader(ns string, idKey []byte, ab *bolt.Bucket) (ArchiveInfo, error) {
	if len(idKey) != 8 {
		return ArchiveInfo{}, t.b.corrupt("archives/"+ns, fmt.Errorf("bad archive key %x", idKey))
	}
	id := binary.BigEndian.Uint64(idKey)
	where := archiveWhere(ns, id)
	p, err := decodeRecord(archiveScope(ns, id), keyInfo, recArchive, ab.Get(keyInfo))
	if err != nil {
		return ArchiveInfo{}, t.b.corrupt(where+"/info", err)
	}
	reason, ent, err := decodeArchivePayload(p, ns)
	if err != nil {
		return ArchiveInfo{}, t.b.corrupt(where+"/info", err)
	}
	info := ArchiveInfo{NamespaceID: ns, ID: id, Reason: reason, Entry: ent}
	info.DocInfo = DocInfo{Owner: ent.Owner, NamespaceID: ns}
	return info, nil
}

func (t *boltTx) archiveBucket(ns string, id uint64) *bolt.Bucket {
	nb := t.top(bucketArchives).Bucket([]byte(ns))
	if nb == nil {
		return nil
	}
	return nb.Bucket(seqKey(id))
}

func (t *boltTx) archive(ns string, id uint64) (Doc, error) {
	ab := t.archiveBucket(ns, id)
	if ab == nil {
		return Doc{}, ErrNotFound
	}
	// The info record names the owner, which the document's records are checked with.
	info, err := t.archiveHeader(ns, seqKey(id), ab)
	if err != nil || ab.Bucket(keySnapshot) == nil {
		return Doc{}, err
	}
	return t.readDoc(ab, docScope(info.Entry.Owner, ns), archiveWhere(ns, id))
}

func (t *boltTx) config(key string) ([]byte, error) {
	k := []byte(key)
	v := t.top(bucketConfig).Get(k)
	if v == nil {
		return nil, ErrNotFound
	}
	p, err := decodeRecord(nil, k, recConfig, v)
	if err != nil {
		return nil, t.b.corrupt("config/"+key, err)
	}
	return bytes.Clone(p), nil
}

func (t *boltTx) configKeys(prefix string) ([]string, error) {
	var out []string
	c := t.top(bucketConfig).Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		if _, err := decodeRecord(nil, k, recConfig, v); err != nil { // a key is checked with its value
			return nil, t.b.corrupt("config/"+string(k), err)
		}
		out = append(out, string(k))
	}
	return out, nil
}

// verify checks every record of the store.
func (t *boltTx) verify() error {
	var errs []error
	note := func(err error) {
		if err != nil && len(errs) < 100 {
			errs = append(errs, err)
		}
	}
	entries, entriesErr := t.entries("")
	note(entriesErr)
	docs, docsErr := t.docs()
	note(docsErr)
	// An active entry and its document are created and removed together (compared only
	// when both lists read whole: a damaged one would make up differences).
	if entriesErr != nil || docsErr != nil {
		entries, docs = nil, nil
	}
	hasDoc := map[docKey]bool{}
	for _, d := range docs {
		hasDoc[docKey{d.Owner, d.NamespaceID}] = true
	}
	active := map[docKey]bool{}
	for _, e := range entries {
		k := docKey{e.Owner, e.NamespaceID}
		if e.State == StateActive {
			active[k] = true
			if !hasDoc[k] {
				note(t.b.corrupt("entries/"+e.NamespaceID, fmt.Errorf("active entry without a document under owner %q", e.Owner)))
			}
		}
	}
	for _, d := range docs {
		if !active[docKey{d.Owner, d.NamespaceID}] {
			note(t.b.corrupt(docWhere(d.Owner, d.NamespaceID), errors.New("document without an active entry")))
		}
	}
	_, err := t.archives("")
	note(err)
	note(t.verifyFeed())
	if t.index() != nil {
		if err := verifyIndex(t); err != nil {
			note(t.b.corrupt("index", err))
		}
	}
	note(t.top(bucketConfig).ForEach(func(k, v []byte) error {
		_, err := t.config(string(k))
		note(err)
		return nil
	}))
	return errors.Join(errs...)
}

// ---- writer ----

func (t *boltTx) putEntry(e Entry) error {
	k := []byte(e.NamespaceID)
	return t.top(bucketEntries).Put(k, encodeRecord(nil, k, recEntry, appendEntryPayload(nil, e)))
}

func (t *boltTx) deleteEntry(ns string) error { return t.top(bucketEntries).Delete([]byte(ns)) }

func (t *boltTx) createDoc(owner, ns string, snapshot []byte) error {
	ob, err := t.top(bucketDocs).CreateBucketIfNotExists([]byte(owner))
	if err != nil {
		return err
	}
	if ob.Bucket([]byte(ns)) != nil {
		if err := ob.DeleteBucket([]byte(ns)); err != nil {
			return err
		}
	}
	db, err := ob.CreateBucket([]byte(ns))
	if err != nil {
		return err
	}
	sb, err := db.CreateBucket(keySnapshot)
	if err != nil {
		return err
	}
	if err := sb.Put(keySnapshot, encodeSnapshotRecord(docScope(owner, ns), 0, snapshot)); err != nil {
		return err
	}
	_, err = db.CreateBucket(keyLog)
	return err
}

func (t *boltTx) logBucket(owner, ns string) *bolt.Bucket {
	k := docKey{owner, ns}
	if lb, ok := t.logs[k]; ok {
		return lb
	}
	var lb *bolt.Bucket
	if db := t.docBucket(owner, ns); db != nil {
		lb = db.Bucket(keyLog)
	}
	if lb != nil {
		lb.FillPercent = logFill
	}
	if t.logs == nil {
		t.logs = make(map[docKey]*bolt.Bucket)
	}
	t.logs[k] = lb
	return lb
}

func (t *boltTx) appendUpdate(owner, ns string, seq uint64, update []byte) error {
	lb := t.logBucket(owner, ns)
	if lb == nil {
		return ErrNotFound
	}
	k := seqKey(seq)
	return lb.Put(k, encodeRecord(docScope(owner, ns), k, recUpdate, update))
}

func (t *boltTx) setSnapshot(owner, ns string, snapshot []byte, through uint64) error {
	db := t.docBucket(owner, ns)
	if db == nil {
		return ErrNotFound
	}
	sb := db.Bucket(keySnapshot)
	if sb == nil {
		return t.b.corrupt(docWhere(owner, ns)+"/snapshot", errors.New("missing snapshot bucket"))
	}
	return sb.Put(keySnapshot, encodeSnapshotRecord(docScope(owner, ns), through, snapshot))
}

func (t *boltTx) trimLog(owner, ns string, through uint64) (count, n int, err error) {
	db := t.docBucket(owner, ns)
	if db == nil {
		return 0, 0, ErrNotFound
	}
	lb := db.Bucket(keyLog)
	if lb == nil {
		return 0, 0, t.b.corrupt(docWhere(owner, ns), errors.New("missing log bucket"))
	}
	var keys [][]byte
	c := lb.Cursor()
	k, v := c.First()
	for ; len(k) == 8 && binary.BigEndian.Uint64(k) <= through; k, v = c.Next() {
		keys = append(keys, bytes.Clone(k))
		n += max(0, len(v)-recHeader)
	}
	count = len(keys)
	if k == nil && count > 0 { // the whole log: drop the bucket rather than each key
		delete(t.logs, docKey{owner, ns})
		if err := db.DeleteBucket(keyLog); err != nil {
			return 0, 0, err
		}
		_, err := db.CreateBucket(keyLog)
		return count, n, err
	}
	for _, k := range keys {
		if err := lb.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	return count, n, nil
}

func (t *boltTx) archiveDoc(owner, ns string, info ArchiveInfo) (ArchiveInfo, error) {
	nb, err := t.top(bucketArchives).CreateBucketIfNotExists([]byte(ns))
	if err != nil {
		return ArchiveInfo{}, err
	}
	id, err := nb.NextSequence()
	if err != nil {
		return ArchiveInfo{}, err
	}
	ab, err := nb.CreateBucket(seqKey(id))
	if err != nil {
		return ArchiveInfo{}, err
	}
	info.ID = id
	if err := ab.Put(keyInfo, encodeRecord(archiveScope(ns, id), keyInfo, recArchive, encodeArchivePayload(info.Reason, info.Entry))); err != nil {
		return ArchiveInfo{}, err
	}
	info.DocInfo = DocInfo{Owner: owner, NamespaceID: ns}
	db := t.docBucket(owner, ns)
	if db == nil {
		return info, nil
	}
	if err := t.readDocInfo(db, docScope(owner, ns), docWhere(owner, ns), &info.DocInfo); err != nil {
		return ArchiveInfo{}, err
	}
	// Records are keyed the same way in an archive, so they move unchanged.
	if err := db.MoveBucket(keySnapshot, ab); err != nil {
		return ArchiveInfo{}, err
	}
	delete(t.logs, docKey{owner, ns})
	if err := db.MoveBucket(keyLog, ab); err != nil {
		return ArchiveInfo{}, err
	}
	return info, t.top(bucketDocs).Bucket([]byte(owner)).DeleteBucket([]byte(ns))
}

func (t *boltTx) putConfig(key string, value []byte) error {
	k := []byte(key)
	return t.top(bucketConfig).Put(k, encodeRecord(nil, k, recConfig, value))
}

func (t *boltTx) deleteConfig(key string) error { return t.top(bucketConfig).Delete([]byte(key)) }

// probe writes a record under meta/probe and removes it in the same transaction.
func (t *boltTx) probe() error {
	meta := t.top(bucketMeta)
	if err := meta.Put(keyProbe, make([]byte, 512)); err != nil {
		return err
	}
	return meta.Delete(keyProbe)
}
