// Package persistence keeps the namespaces of a Nomicore instance on disk, so that a hub or
// a peer restarts with what it had: registry entries, the document of each namespace as a
// compacted snapshot plus an append log of the updates written since, archives, and a small
// host configuration map. The registry keeps the namespaces through it, a node keeps its
// configuration in it (a peer's replication targets), and nmcr store reads a stopped
// instance's file with it. (The protocol's rules it serves:
// docs/protocol.md#degraded-persistence and docs/protocol.md#restart-and-shutdown.)
//
// The API is split by what its users need. Catalog holds the registry entries, the host
// configuration, health and counters: every node has one, a node of a hub cluster too (the
// cluster package keeps it in JetStream). Documents holds the documents and archives of
// this process: a single hub and a peer have one, a cluster node none (its documents are
// the cluster's namespace logs). Store is both. BoltStore keeps everything in one bbolt
// file; MemoryStore keeps it in memory for tests. Both run the same write pipeline, and the
// persistencetest package runs one conformance suite against both.
//
// # Model
//
// The registry owns the live documents; the store only keeps bytes. It never decodes Yjs:
// updates and snapshots are opaque, and compaction folds a log with an injected Compactor.
// Documents are partitioned by owner (the local storage partition a namespace belongs to)
// and namespace id; registry entries are keyed by namespace id alone, so an id is unique
// across owners.
//
// # Writing
//
// Append is the registry's dirty notification: every update the registry applies to a
// namespace is appended from inside that namespace's write sequencer slot. It never touches
// the disk: it numbers the update (1, 2, … per namespace, continuing after Load) and queues it.
// One committer goroutine writes the queue in group-commit transactions: the first append to
// an idle queue waits for company — Options.UnawaitedCommitDelay (20 ms) while nothing waits
// for the queue to be durable, Options.CommitDelay (2 ms) once something does (WaitFlushed, a
// snapshot or archive operation) — a batch carries at most Options.MaxBatch appends, and the
// batch is durable (fsynced) when its transaction commits.
// With a change feed, an append made with AppendNoteLater owes its namespace's state vector
// (NoteStateVector, given by the registry once for a run of appends): a batch ends only
// where every namespace's last append in it has its state vector, and the appends left
// behind join the next group (changes.go).
// Flushed, WaitFlushed and Options.OnFlushed tell how far each namespace is durable.
// QueueConfig hands a configuration value to the same committer, so that it shares the
// transaction of the appends around it (queuedconfig.go).
//
// The queue is bounded (Options.MaxQueuedAppends, Options.MaxQueuedBytes). Overflow policy:
// refuse the newest — Append returns ErrBackpressure at once, queues nothing and uses no
// sequence number; the registry then treats the namespace as degraded and later writes its
// whole state with ReplaceSnapshot.
//
// When a commit fails (a full disk, an I/O error), its appends stay at the head of the queue
// and are retried with exponential backoff (Options.RetryMin … RetryMax); nothing is dropped
// or reordered. Healthy turns false and Options.OnHealthChange reports it, so the registry can
// refuse peer updates with PERSISTENCE_DEGRADED on a hub, or keep applying hub updates in
// memory on a peer; the first successful commit turns it true again. Operations that
// wait for their result (ReplaceSnapshot, Archive, Reset, compaction results) are not
// retried: their caller gets the error.
//
// Snapshot replacement, compaction results, archive and reset go through the same queue, so
// each is ordered after the appends made before it.
//
// # Compaction
//
// When the durable log of a resident namespace passes Options.CompactAfterCount updates or
// Options.CompactAfterBytes bytes, and holds at least 1/Options.CompactSnapshotRatio of the
// snapshot's bytes (so rewriting the snapshot is amortised over the log, whatever the
// document's size), the compaction goroutine reads the document, folds it
// with the Compactor outside any transaction, and hands the new snapshot to the committer,
// which writes it and drops the folded log entries in one transaction (unless the snapshot
// changed meanwhile). Appends go on during the fold and stay in the log.
//
// # Memory
//
// Only resident namespaces (between Load or CreateEntry and Release) have in-memory state,
// under 200 bytes each; after Release, once its queued appends are committed, the store
// keeps nothing for a namespace. Load returns the appends still queued too, so a namespace
// reloaded while commits fail loses nothing.
//
// # Crash safety
//
// A transaction is all or nothing, batches commit in queue order, and the log of a namespace
// must be gapless: after a crash at any moment a document reads back as a prefix of its
// appends, at least as long as the last reported durable position. Every stored record
// carries a magic byte, a format version and a CRC-32C of its place (bucket names and key)
// and value; a record that fails them, a gap in a log, or a bbolt panic on a damaged page
// gives a *CorruptError naming the file, never a crash. BoltStore.Verify checks a whole file.
//
// # Files
//
// A BoltStore is one bbolt file per instance, DATA/nomicore.db (OpenDataDir), held with an
// exclusive lock: a second open fails with ErrLocked within Options.LockTimeout. A read-only
// open (Options.ReadOnly, used by nmcr store) takes a shared lock and writes nothing.
//
// # Shutdown
//
// Close (after the registry has shut down) stops accepting writes, commits the queue, waits
// for its goroutines and closes the file.
//
// # Concurrency
//
// Every method of a store is safe for concurrent use. One committer goroutine owns every write
// to document data, in queue order; one compaction goroutine folds logs; registry entries
// and configuration are written by the calling goroutine in their own transactions. The
// Options callbacks run on the committer goroutine (OnCompactionError on the compaction
// goroutine) and must not block; a panic in one is recovered.
package persistence
