// Package registry keeps the namespaces of a Nomicore instance — the documents that hub and
// peers replicate. It creates them (hub) or imports them from a bootstrap snapshot (peer),
// loads each one into a runtime while leases on it are held, and runs every write to its
// document through that runtime's write sequencer, so one goroutine owns each live
// document. The replication layer reaches a document only through the Sessions of a
// Lease; the admin API reads and writes through a Lease too. The types and functions that
// implement a rule of the protocol cite its section of docs/protocol.md.
//
// A typical use, on a hub (the package example runs a hub and a peer end to end):
//
//	reg, _ := registry.New(registry.Config{Role: registry.RoleHub, Catalog: store, Documents: store})
//	created, _ := reg.Create(ctx, owner)
//	lease, _ := reg.Open(ctx, owner, created.NamespaceID)
//	defer lease.Release()
//	sess, _, _ := lease.OpenSession(ctx, registry.SessionOptions{Peer: "peer-1"})
//	res, err := sess.Apply(ctx, update) // a peer's update: gates, protected check, apply
//
// # Namespaces, leases and runtimes
//
// A namespace is an entry in a persistence.Catalog and one Yjs document. The document is
// kept either by a persistence.Documents of this process under (owner, namespace id) — a
// single hub or a peer, Config.Documents — or by the shared log of a hub cluster
// (Config.Shared, see SharedLog); a registry has exactly one of the two, and so has each of
// its runtimes. Registry.Open checks the owner (a mismatch is ErrNotFound, like a missing namespace) and
// returns a Lease. The first lease loads the document — snapshot plus log — into a
// runtime; the last Release unloads it in the background, so an idle namespace costs no
// memory. Open, Import, Reset and Archive of one id are serialised; an Open that follows an
// unload waits for it.
//
// # The write sequencer
//
// Each runtime has one goroutine that owns the document and runs slots from a bounded FIFO
// queue (Config.MaxQueuedSlots; when full, operations are refused at once with
// ErrOverloaded). Every write is a slot — a remote apply, a local write, an epoch bump, a
// schema replace — and so are the reads that must be consistent with the update stream
// (state vectors, diffs, the bootstrap snapshot of a new session). An apply slot runs, in
// order: the gates (broken document, fenced session, role, degraded persistence), the
// protected check, the live apply, and the dirty notification (Documents.Append, which only
// queues for the group committer). Nothing in a slot waits on the network, a session, a
// lease or the registry: results go to callbacks that must not block (the asynchronous
// forms) or to one-slot channels (the blocking forms).
//
// # Sessions and fan-out
//
// A Lease opens Sessions, one per replication channel. A runtime installs one document
// observer; each transaction's update is fanned out, as one immutable slice shared by all, to
// the bounded queue of every session and watcher, except the session the update came from
// (echo suppression by origin). When the document held pending structs before an apply, the
// origin session gets the transaction's update too: it may contain earlier structs the
// apply released, which the origin lacks. A queue that overflows drops everything queued
// and reports NeedsResync; it stays silent until the session's next Diff, which covers
// everything dropped.
//
// # Identity, fencing and protected apply
//
// The root map `meta` holds the namespace's replication identity (replicationId, the
// lineage, and replicationEpoch, the generation) and, when set, its schema. Only the
// registry writes it: Create writes the identity, BumpEpoch and ReplaceSchema change it in a
// slot. After an epoch bump every session of the old epoch is fenced at once (Poll().Fenced)
// and refused at the start of any later slot (ErrFenced). On a hub every peer update, and on
// both sides every local write, must leave meta untouched (ErrProtected), checked in the slot
// before the live apply.
//
// # The active schema
//
// meta.schema = {"updatedAt": string, "definition": object} is installed as the namespace's
// active schema (Lease.ActiveSchema) when the namespace loads and when the hub replaces it;
// there is no schema compiler here, so installing means checking that shape and computing
// the definition's SemanticFingerprint. On a peer, an apply of a hub update that touched
// meta (yjs.InspectUpdate, proportional to the update) and changed meta.schema re-arms it
// in the same slot, before the dirty notification, and reports it in ApplyResult.Rearm —
// installed, or failed (RearmInvalid, RearmInternal: no active schema then). The namespace
// layer turns that into the schema-rearm-* events and closes the channel on failure. A peer
// replica whose schema cannot be installed — after a failed re-arm, or when it loads
// that way — opens no new replication session (ErrSchemaInvalid) until a valid schema is
// installed through a session still open, or the replica is reset.
//
// # Persistence degraded
//
// The store reports failed commits (Documents.Healthy) and refuses appends when its queue is
// full. Then a hub refuses peer updates and local writes with ErrDegraded but keeps
// serving reads, diffs and snapshots; a peer refuses local writes but still applies its
// hub's updates in memory. A change the store refused is saved later by a snapshot, which a
// per-runtime saver keeps trying to write; when the store commits again and nothing waits
// for a snapshot, the namespace is healthy again. A snapshot the store refuses for a reason
// trying again cannot cure (it offers no snapshots, is read-only, closed or corrupt) is
// reported once, with its cause, and not tried again: the namespace then refuses writes,
// naming that cause, until it is loaded again (Registry.SaveFailures counts both kinds).
// A hub cluster has no saver: the shared log keeps every write.
//
// # Shutdown
//
// Close (after the replication layer released its leases) unloads every namespace after its
// admitted slots and waits for every goroutine; the store is closed afterwards by its owner.
//
// # Concurrency
//
// Registry, Lease, Session and Watch are safe for concurrent use. Each loaded namespace has
// one sequencer goroutine that alone touches its document; every other goroutine reaches
// the document by submitting a slot. Callbacks of the asynchronous forms (ApplyAsync, …)
// run on that goroutine and must not block; a panic in one is recovered. Registry methods
// that may wait for the store (Open, Create, Import, …) must not be called from such a
// callback.
package registry
