package persistence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A store keeps what an instance needs across restarts: its namespaces' entries and
// documents, and its host configuration (docs/protocol.md#restart-and-shutdown). Its API is
// split by what its users need:
//
//   - [Catalog]: the registry entries, a small host configuration map, health, counters and
//     Close — what every node has, a hub cluster's node too (the cluster package keeps its
//     catalog in JetStream).
//   - [Documents]: the document data of each namespace kept by this process — a compacted
//     snapshot plus the log of updates appended since — and archives. A single hub and a
//     peer have one; a node of a hub cluster has none (its documents are the cluster's
//     namespace logs, which the registry reads through registry.SharedLog).
//
// [Store] is both: what [MemoryStore] (for tests) and [BoltStore] (one bbolt file per
// instance) implement. Both share the same write pipeline, so they behave alike;
// persistencetest runs one conformance suite against both. Updates and snapshots are opaque
// bytes: a store never decodes Yjs.
//
// All methods of every implementation are safe for concurrent use.
type Store interface {
	Catalog
	Documents
}

// Catalog is the part of a store every node has: the registry entries, the host
// configuration map, health and counters. See [Store].
type Catalog interface {
	// CreateEntry stores a new registry entry for e.NamespaceID with snapshot as the
	// namespace's first document (nil for an empty document), in one transaction. It fails
	// with ErrExists when the namespace id is taken (the registry then retries with another
	// id). A store that also keeps [Documents] stores the snapshot as the document, with an
	// empty update log, and leaves the namespace resident (see Documents.Load).
	CreateEntry(ctx context.Context, e Entry, snapshot []byte) error
	// Entry returns the registry entry of namespaceID, or ErrNotFound.
	Entry(ctx context.Context, namespaceID string) (Entry, error)
	// Entries lists the entries of owner, or of every owner when owner is "", ordered by
	// namespaceId. Tombstones of deleted namespaces are left out.
	Entries(ctx context.Context, owner string) ([]Entry, error)
	// ListEntries pages through the entries q selects (tombstones left out), ordered by
	// namespaceId, reading only what the page needs: the catalog keeps indexes by owner, by
	// name and by label (see names.go).
	ListEntries(ctx context.Context, q EntryQuery) (EntryPage, error)
	// Relabel changes the name and labels of the active entry of (owner, namespaceID) as
	// change says, in one transaction, and returns the entry as it is now. A name another
	// namespace of the owner has is ErrNameTaken; a missing, archived or deleted entry, or
	// another owner's, ErrNotFound.
	Relabel(ctx context.Context, owner, namespaceID string, change EntryChange) (Entry, error)
	// DeleteEntry deletes the namespace (owner, namespaceID): its entry becomes a tombstone
	// (StateDeleted, without name or labels), so the id is never taken again, and a store that
	// keeps [Documents] removes its document and its versions, and writes the namespace's
	// "deleted" change when it keeps a change feed, in the same transaction, ordered after
	// earlier appends. A missing entry, another owner's or one deleted already is ErrNotFound.
	DeleteEntry(ctx context.Context, owner, namespaceID string) error

	// PutConfig stores value under key in the host configuration map (e.g. a peer's
	// replication targets).
	PutConfig(ctx context.Context, key string, value []byte) error
	// Config returns the value of key, or ErrNotFound.
	Config(ctx context.Context, key string) ([]byte, error)
	// DeleteConfig removes key; removing an absent key is not an error.
	DeleteConfig(ctx context.Context, key string) error
	// ConfigKeys lists the keys that start with prefix, in byte order.
	ConfigKeys(ctx context.Context, prefix string) ([]string, error)

	// Healthy reports whether the store can take writes now: on a local store, whether the
	// last commit succeeded (Options.OnHealthChange reports changes); on a hub cluster's,
	// whether the node has quorum. While it is false the registry treats its namespaces as
	// persistence-degraded.
	Healthy() bool
	// Stats returns counters for metrics and tests.
	Stats() Stats
	// Close stops accepting writes, commits the queued appends (giving up when ctx ends: the
	// abandoned appends are reported failed and Close returns an error counting them), stops
	// every goroutine of the store and releases the file. Close is idempotent; later calls
	// return the first result.
	Close(ctx context.Context) error
}

// Documents is the document data a store keeps for this process: the document of each
// namespace (a snapshot plus the log of updates appended since) and archives. See [Store].
type Documents interface {
	// Load reads the document of (owner, namespaceID): the snapshot and the updates appended
	// after it, in append order, including appends still queued for commit. It fails with
	// ErrNotFound when there is no document (never created, archived or reset). Load makes
	// the namespace resident: Append is accepted until Release.
	Load(ctx context.Context, owner, namespaceID string) (Doc, error)
	// Append queues update for the group committer and returns its append sequence number
	// (Doc.Through+1, +2, … after Load). It never waits for disk: it is the dirty
	// notification the registry calls inside its write sequencer slot. It copies
	// update. It fails with ErrNotLoaded when the namespace is not resident, ErrClosed after
	// Close, and ErrBackpressure when the commit queue is full — then nothing was queued, no
	// sequence number was used, and the caller must persist that change later with
	// ReplaceSnapshot.
	Append(owner, namespaceID string, update []byte) (uint64, error)
	// Flushed returns the highest append sequence number of a resident namespace known to be
	// durable (0 when none is, or when the namespace is not resident).
	Flushed(owner, namespaceID string) uint64
	// WaitFlushed waits until append seq of (owner, namespaceID) is durable. It returns the
	// context's error when ctx ends first, ErrNotLoaded when the namespace is not resident,
	// and ErrClosed (or ErrNotFound if the document was removed meanwhile) when the append
	// was abandoned.
	WaitFlushed(ctx context.Context, owner, namespaceID string, seq uint64) error
	// ReplaceSnapshot stores snapshot as the document of a resident namespace, declaring that
	// it contains every append up to through; logged updates up to through are dropped and
	// later ones kept. It is ordered after every earlier Append of that namespace. If ctx ends
	// first it returns ctx's error and the replacement may or may not happen.
	ReplaceSnapshot(ctx context.Context, owner, namespaceID string, snapshot []byte, through uint64) error
	// Compact folds the update log of (owner, namespaceID) into its snapshot now, with
	// Options.Compactor. Background compaction does the same when the log passes the
	// thresholds of Options.
	Compact(ctx context.Context, owner, namespaceID string) error
	// Release ends the residency Load or CreateEntry started: once its queued appends are
	// committed the store keeps nothing in memory for that namespace.
	Release(owner, namespaceID string)

	// Archive marks the entry of (owner, namespaceID) archived and moves its document under a
	// new archive; it returns that archive. It is ordered after earlier appends, ends the
	// residency, and fails with ErrNotFound (no such entry for that owner) or ErrArchived.
	Archive(ctx context.Context, owner, namespaceID string) (ArchiveInfo, error)
	// Reset moves the entry and the document of (owner, namespaceID) under a new archive and
	// removes both, so the namespace has no local replica (a peer bootstraps it again with
	// CreateEntry). Ordered like Archive; fails with ErrNotFound.
	Reset(ctx context.Context, owner, namespaceID string) (ArchiveInfo, error)
	// Delete is DeleteEntry that, when keepArchive is set, first moves the document under a
	// new archive (reason delete) and returns it: a peer keeps what it held that the hub may
	// not have had. Without keepArchive the document is removed and the returned ArchiveInfo
	// is zero.
	Delete(ctx context.Context, owner, namespaceID string, keepArchive bool) (ArchiveInfo, error)
	// Archives lists the archives of namespaceID (of every namespace when namespaceID is ""),
	// ordered by namespaceId and archive id.
	Archives(ctx context.Context, namespaceID string) ([]ArchiveInfo, error)
	// LoadArchive reads the document kept in an archive, or fails with ErrNotFound.
	LoadArchive(ctx context.Context, namespaceID string, id uint64) (Doc, error)

	// Healthy reports whether the last commit of document data succeeded (the same answer
	// as Catalog.Healthy on a store that is both): while it is false the registry refuses
	// the writes it could not save.
	Healthy() bool
}

// State is the state of a registry entry.
type State uint8

// Entry states.
const (
	StateActive   State = 1
	StateArchived State = 2
	// StateDeleted is the tombstone of a deleted namespace: no document, no name, no labels;
	// it keeps the id from ever being taken again (CreateEntry answers ErrExists).
	StateDeleted State = 3
)

func (s State) String() string {
	switch s {
	case StateActive:
		return "active"
	case StateArchived:
		return "archived"
	case StateDeleted:
		return "deleted"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Entry is the registry entry of one namespace.
type Entry struct {
	NamespaceID string
	Owner       string // the local storage partition the namespace belongs to; never on the wire
	State       State
	CreatedAt   time.Time         // given by the caller; the store reads no clock
	Meta        map[string]string // small free-form annotations; nil when empty
	// Name is the namespace's name, unique among the active and archived namespaces of its
	// owner ("" for none); Labels its labels (nil when none). See CheckName and CheckLabels.
	Name   string
	Labels map[string]string
}

// Doc is the stored document of a namespace: Snapshot holds every append up to
// SnapshotThrough; Updates are the appends SnapshotThrough+1 … Through, in order.
type Doc struct {
	Snapshot        []byte
	SnapshotThrough uint64
	Updates         [][]byte
	Through         uint64
}

// ArchiveReason says why an archive was made.
type ArchiveReason uint8

// Archive reasons.
const (
	ReasonArchive ArchiveReason = 1 // Documents.Archive
	ReasonReset   ArchiveReason = 2 // Documents.Reset
	ReasonDelete  ArchiveReason = 3 // Documents.Delete with keepArchive
)

func (r ArchiveReason) String() string {
	switch r {
	case ReasonArchive:
		return "archive"
	case ReasonReset:
		return "reset"
	case ReasonDelete:
		return "delete"
	}
	return "ArchiveReason(" + strconv.Itoa(int(r)) + ")"
}

// ArchiveInfo describes one archive: the entry as it was and the size of the document kept.
type ArchiveInfo struct {
	NamespaceID string
	ID          uint64 // 1, 2, … per namespace
	Reason      ArchiveReason
	Entry       Entry // the entry when it was archived (State as it was before)
	DocInfo           // the document kept (all zero when the namespace had none)
}

// DocInfo gives the size of a stored document without reading it.
type DocInfo struct {
	Owner           string
	NamespaceID     string
	HasDoc          bool
	SnapshotBytes   int
	SnapshotThrough uint64
	LogUpdates      int
	LogBytes        int
	Through         uint64
}

// Stats are counters of a store.
type Stats struct {
	Resident     int    // namespaces with in-memory state (loaded, or with queued appends)
	Queued       int    // appends waiting for commit
	QueuedBytes  int    // their bytes
	Commits      uint64 // successful group-commit transactions
	Committed    uint64 // appends made durable
	CommitErrors uint64 // failed commit attempts
	Backpressure uint64 // appends refused with ErrBackpressure
	Compactions  uint64 // logs folded into snapshots
}

// Compactor folds updates (oldest first) into snapshot and returns the new snapshot. The
// registry passes a yjs.MergeUpdates-based fold; it runs on the store's compaction goroutine,
// never inside a write transaction, and must not keep or modify its arguments.
type Compactor func(snapshot []byte, updates [][]byte) ([]byte, error)

// Errors. Match them with errors.Is.
var (
	// ErrExists: CreateEntry found the namespaceId taken.
	ErrExists = errors.New("persistence: namespace already exists")
	// ErrNotFound: no such entry, document, archive or configuration key.
	ErrNotFound = errors.New("persistence: not found")
	// ErrNameTaken: another namespace of the owner has that name.
	ErrNameTaken = errors.New("persistence: name taken")
	// ErrArchived: the namespace is archived already.
	ErrArchived = errors.New("persistence: namespace is archived")
	// ErrNotLoaded: Append or a flush query on a namespace that is not resident.
	ErrNotLoaded = errors.New("persistence: namespace not loaded")
	// ErrBackpressure: Append refused because the commit queue is full (overflow policy:
	// refuse the newest, at once). The registry treats the namespace as degraded.
	ErrBackpressure = errors.New("persistence: commit queue full")
	// ErrClosed: the store is closed, or Close abandoned the operation.
	ErrClosed = errors.New("persistence: store closed")
	// ErrReadOnly: a write to a store opened read-only.
	ErrReadOnly = errors.New("persistence: store opened read-only")
	// ErrNoCompactor: Compact without Options.Compactor.
	ErrNoCompactor = errors.New("persistence: no compactor configured")
	// ErrInvalid: a malformed argument (empty or oversized name, sequence out of range).
	ErrInvalid = errors.New("persistence: invalid argument")
	// ErrLocked: the store file is locked by another process (or another open).
	ErrLocked = errors.New("persistence: store in use by another process")
	// ErrCorrupt: the store file failed a validity check; see CorruptError.
	ErrCorrupt = errors.New("persistence: store corrupt")
	// ErrUnavailable: a store shared by several processes (a hub cluster) cannot answer now —
	// it has no quorum, or did not answer within its deadline. Nothing was written. The
	// registry treats it as persistence degraded (docs/protocol.md#degraded-persistence).
	ErrUnavailable = errors.New("persistence: store unavailable")
	// ErrUnsupported: the operation does not exist in this kind of store. None of this
	// package's stores answers it; a Documents that keeps no snapshots, say, would.
	ErrUnsupported = errors.New("persistence: operation not supported by this store")
)

// CorruptError reports a store file that failed a check: a bad magic, version or checksum in
// a record, a gap in an update log, or a panic of bbolt on a damaged page. It unwraps to
// ErrCorrupt.
type CorruptError struct {
	Path   string // the store file
	Where  string // the record ("docs/<owner>/<ns>/log/42"), or "" for the file as a whole
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("persistence: store file %s is corrupt: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("persistence: store file %s is corrupt at %s: %s", e.Path, e.Where, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Name limits: owners, namespace ids and configuration keys are 1..MaxNameBytes bytes of
// valid UTF-8.
const MaxNameBytes = 255
