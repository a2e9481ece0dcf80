// Package cluster lets several hub processes act as one hub: every node serves every
// namespace, peers may attach to any node, and nothing a node acknowledged is lost when a
// node dies. The shared state lives in NATS JetStream — a replicated log and key-value
// store — which each node embeds (an in-process NATS server; the servers form one NATS
// cluster over their routes) or reaches at --nats-url.
//
// # What is where
//
// Every stream and bucket has Config.Replicas copies (min(3, nodes) by default), so a
// write is durable once a quorum of them stored it.
//
//   - The log streams hold one subject per namespace: NOMICORE_LOG (nomicore.log.ns.<owner>.<id>,
//     the owner partition base64url in the subject; also the quorum probes) and
//     NOMICORE_LOG_k (nomicore.log<k>.ns.…), a namespace placed on one of
//     Config.LogStreams by a hash of its id when it is created (streams.go); each also
//     holds the change-feed markers of its namespaces (feed.go: the hub's change feed is
//     every log stream read across namespaces, its cursor a position in each). Each message
//     is a record — an update some node admitted, with the epoch it was admitted under and
//     its origin (the node process and its number for it), a meta change (an epoch bump, a
//     schema replacement, a new name or labels), or the namespace's deletion — or a batch
//     of updates one node admitted one after the other (record.go). The stream drops a
//     second copy of a message by its message id.
//   - Bucket nomicore_entries holds the namespace entries (owner, state, creation time),
//     each with the namespace's first document (its identity, written at creation) and its
//     meta record: how many meta changes were claimed, and the epoch and schema after them.
//     Creating a namespace is create-if-absent; claiming a meta change is compare-and-set
//     on the entry's revision, so of two concurrent epoch bumps exactly one wins.
//   - Object store nomicore_snapshots holds each namespace's newest snapshot, tagged with
//     the log position it covers.
//   - Bucket nomicore_leases holds the compaction leases; nomicore_nodes the node names
//     and the log format each writes (upgrade.go); nomicore_config the hub's configuration
//     map.
//
// The tokens file is not shared: each node reads its own (distribute the same file).
//
// # The write path
//
// The registry (registry.SharedLog is the seam; this package implements it) runs an
// update that arrives at node X — from a peer session, the admin API or an editor —
// through the gates of the namespace's write sequencer on X (fenced session, role, quorum,
// the protected meta check) and then, instead of applying it, publishes it as a record —
// alone, or with the others of its namespace admitted while two messages of it were on
// their way (publisher.go).
// Every node that has the namespace loaded follows its subject in log order with a
// consumer of its own and applies each record through its own sequencer, fanning it out to
// its local sessions; X recognises its own records and does not send them back to the
// session they came from (nor an editor's to the watch of its room, which relays it). The
// caller on X is answered (UPDATE_ACK, the admin API's 204, an editor's update relayed to
// the room's other editors) only in the slot that applies the record there: by then it is
// stored on a quorum (a consumer only sees committed messages) and applied in log order
// under the epoch it was admitted for. The records of a batch share one log position and
// are applied in one slot, in their order, each decided on the state the ones before it
// left.
//
// Every decision of that slot depends only on the log before the record, so every node
// decides the same: an update admitted under an epoch older than the current one is
// refused (docs/protocol.md#identity-fencing), an update touching meta is refused
// (docs/protocol.md#protected-apply), a meta change is applied once
// per generation and, when it raises the epoch, fences every local session of an older
// epoch before any later slot.
//
// # Epoch bumps and schema replacement
//
// The node asked for a meta change catches up with the log, reads the namespace's meta
// record, prepares the registry's update of meta on a copy of its document, claims the
// change with compare-and-set (the loser of a race writes nothing and answers
// registry.ErrConflict), publishes it as a meta record and waits until it applied it. A
// change claimed by a node that died before publishing is completed by the next node asked
// for one (after Config.SharedStaleClaim), from the meta record.
//
// # Deleting a namespace
//
// The node asked to delete catches up with the log, checks the expected epoch against what
// it applied and against the meta record, and turns the entry into a tombstone by
// compare-and-set on the record's revision (a racing epoch bump or delete on another node
// makes one of the two fail); the name's claim is released. From then on no node loads the
// namespace and its id is never created again. It then publishes a deletion record: every
// node that has the namespace loaded applies it in log order — its peers' channels end
// with NAMESPACE_DELETED, its editors are closed with 4404, writes still waiting are
// refused — and unloads it. Once the deleting node applied it, it purges the subject's
// records before the deletion record and removes the snapshot object; a compaction that
// wrote a snapshot meanwhile removes it itself when it finds the tombstone. A delete
// interrupted after the tombstone is completed by the next delete of the namespace
// (Node.FinishDelete).
//
// # Compaction
//
// The node that sees a namespace log grow past a threshold takes the namespace's lease
// (created only if absent, with a TTL; renewed by compare-and-set), writes a snapshot of
// its document as applied through position S, and purges the records the previous
// snapshot covered — never past what every node's consumer acknowledged. Loading a
// namespace is its snapshot plus the records after it; a node that finds the log purged
// past its position takes the snapshot instead.
//
// # Failures
//
// A node probes the quorum with a small write every Config.ProbeInterval. Without quorum
// it refuses writes (PERSISTENCE_DEGRADED to peers, 503 from the admin API, /readyz not
// ready) and serves reads of what it has loaded; it accepts writes again by itself once a
// probe succeeds. Every JetStream call has a deadline; running into it is an
// *UnavailableError (persistence.ErrUnavailable), never a hang. A group whose leader's
// node died answers nothing for 4 to 9 seconds, until an election: the reads an open needs
// are then answered by a replica (replica.go), and the publisher sends again what the
// stream did not acknowledge until the new leader answers. A
// restarted node catches up from JetStream: its replicas by the NATS cluster's own means,
// its namespaces by loading them again. Node.Ready says when a node can serve — quorum now,
// and its replicas caught up since it started — and the hub refuses peer connections until
// then.
//
// # Sizes
//
// A write is one record, applied whole on every node: the node's largest update
// (Config.MaxUpdateBytes, the hub's largest write under its replication limits) must fit in
// one NATS message. The embedded server is sized for it; Node.MaxUpdateBytes says what an
// existing NATS cluster's max_payload allows. Snapshots are chunked by the object store.
package cluster
