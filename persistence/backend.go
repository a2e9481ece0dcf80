package persistence

import "time"

// backend is the storage under the shared write pipeline (engine): atomic read and write
// transactions over the data model, and nothing else. The memory and the bbolt backends
// implement it; every rule about what the data means lives in the engine.
type backend interface {
	// view runs fn in a read transaction that sees one consistent state.
	view(fn func(r reader) error) error
	// update runs fn in a write transaction: all of its writes become durable together when
	// fn returns nil, and none of them when fn returns an error.
	update(fn func(w writer) error) error
	// close releases the backend; no transaction is running or will run.
	close() error
}

// reader reads the data model. Every returned slice is a copy owned by the caller.
type reader interface {
	entry(ns string) (Entry, error) // ErrNotFound
	entries(owner string) ([]Entry, error)
	// doc reads a whole document (ErrNotFound when there is none).
	doc(owner, ns string) (Doc, error)
	// docInfo gives the size of a document (HasDoc false when there is none).
	docInfo(owner, ns string) (DocInfo, error)
	// docs lists every stored document, by owner then namespace.
	docs() ([]DocInfo, error)
	archives(ns string) ([]ArchiveInfo, error)
	archive(ns string, id uint64) (Doc, error) // ErrNotFound
	config(key string) ([]byte, error)         // ErrNotFound
	configKeys(prefix string) ([]string, error)
	// changeBounds gives the cursors the change feed can resume after; changes returns up
	// to limit records after cursor after; latestChanges calls fn with the newest record
	// of each namespace, by namespace id (changes.go).
	changeBounds() (ChangeBounds, error)
	changes(after uint64, limit int) ([]Change, error)
	latestChanges(fn func(Change) error) error
	// versions lists a namespace's versions; version reads one with its state (ErrNotFound).
	versions(ns string) ([]Version, error)
	version(ns string, id uint64) (Version, []byte, error)
	// entryScan calls fn with every entry whose id is after `after`, in id order, until fn
	// answers false.
	entryScan(after string, fn func(Entry) (bool, error)) error
	// indexGet returns the value of an index key, nil when it is absent.
	indexGet(key []byte) ([]byte, error)
	// indexScan calls fn with the index keys from `from` on that start with prefix, in byte
	// order, until fn answers false. Key and value are valid only during the call.
	indexScan(prefix, from []byte, fn func(key, value []byte) (bool, error)) error
}

// writer changes the data model inside a write transaction. The engine checks arguments and
// preconditions; a writer method fails only on storage errors, or with ErrNotFound where
// noted.
type writer interface {
	reader
	putEntry(e Entry) error
	deleteEntry(ns string) error
	// createDoc stores an empty log and the given snapshot (through 0), replacing any
	// document of (owner, ns).
	createDoc(owner, ns string, snapshot []byte) error
	// appendUpdate adds update to the log of (owner, ns) under seq; ErrNotFound when the
	// document does not exist.
	appendUpdate(owner, ns string, seq uint64, update []byte) error
	// setSnapshot replaces the snapshot of an existing document.
	setSnapshot(owner, ns string, snapshot []byte, through uint64) error
	// trimLog drops the logged updates with seq ≤ through and returns how many and how many
	// bytes it dropped.
	trimLog(owner, ns string, through uint64) (count, bytes int, err error)
	// archiveDoc copies the document of (owner, ns), if any, and info.Entry into a new
	// archive of ns, removes the document, and returns info completed with the archive id and
	// document sizes.
	archiveDoc(owner, ns string, info ArchiveInfo) (ArchiveInfo, error)
	putConfig(key string, value []byte) error
	deleteConfig(key string) error
	// probe writes something and removes it again, for a commit that changes nothing but
	// needs pages like any write (probe.go).
	probe() error
	// putChange adds a change-feed record under the next cursor, which it returns, and
	// makes it its namespace's newest; pruneChanges drops at most limit of the oldest
	// records that are older than before (zero: none by age) or beyond keep records
	// (negative: none by count).
	putChange(c Change) (uint64, error)
	pruneChanges(before time.Time, keep, limit int) error
	// putVersion stores a version under the namespace's next version id, which it returns;
	// deleteVersion and deleteVersions remove one or all of a namespace's.
	putVersion(v Version, state []byte) (uint64, error)
	deleteVersion(ns string, id uint64) error
	deleteVersions(ns string) error
	// deleteDoc removes the document of (owner, ns), if any.
	deleteDoc(owner, ns string) error
	indexPut(key, value []byte) error
	indexDelete(key []byte) error
	// indexClear removes every index key.
	indexClear() error
}
