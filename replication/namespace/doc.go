// Package namespace is the namespace layer of replication: over one connection (package
// ws, reached only through package seam), it replicates any number of namespaces — one Yjs
// document each, kept by the registry — between the hub and a peer.
//
// The hub's side is Hub: pass its NewHandler as ws.HubOptions.Namespaces. The peer's side
// is TargetController, which also keeps the peer's list of targets (the namespaces it
// replicates, each with the local owner of its replica) across connections: pass its
// NewHandler as ws.PeerOptions.Namespaces.
//
// # A namespace's life on a connection
//
// For each namespace, each connection has one channel. The peer opens it with
// OPEN_NAMESPACE, declaring the identity (replication id and epoch) of its local replica, or
// none. The hub checks the peer's authorization for the namespace, opens it in its registry
// and answers OPEN_OK: with no local replica it then sends a snapshot, which the peer
// imports and acknowledges (the bootstrap); with a matching identity they go straight to
// reconciling; a different identity ends the channel conflicted. A connection carries at
// most one lifecycle per namespace: once ended, a namespace reopens only on a new
// connection.
//
// Reconciling is a sync round started by the peer: each side sends its state vector
// (SYNC_STEP1), answers the other's with the diff it lacks (SYNC_STEP2), and confirms the
// diff it applied (SYNC_APPLIED). When both diffs are applied the channel is live: every
// change applied to the namespace's document — locally, or from another connection — is
// sent as an UPDATE and acknowledged by the remote once applied, within a window of
// maxInFlightUpdates unacknowledged UPDATEs. Whatever loses continuity (a queue that
// overflowed, a window that timed out unacknowledged, a shed) sends the channel to
// needs-resync, and the next round repairs it; nothing is resent. The peer also starts a
// round periodically. CLOSE_NAMESPACE and CLOSE_OK end a channel in an orderly way; a
// namespace ERROR ends it in the state the error registry gives (failed, closed or
// conflicted); IDENTITY_CHANGED (the hub's epoch bump) ends it conflicted.
//
// Every remote change is applied in the namespace's single write sequencer (the registry's)
// and acknowledged after it settled there; registry calls that may block (opening a
// namespace, importing a snapshot) run off the connection's goroutine and post their
// results back.
//
// # Layout
//
// channel holds the state machine both sides share; hubChannel and peerChannel embed it
// with what only their side keeps, and implement channelRole, the hooks where the two sides
// behave differently. Likewise nsConn is the shared per-connection part, and hubConn and
// peerConn, the two seam.Handler implementations, add their side (connRole). Routing is by
// message type: the frames both sides receive in nsConn.route, the frames only one side
// receives (by their direction in protocol's message rules) in that side's HandleFrame.
//
// Files: conn.go (the shared per-connection part), channel.go (states and endings), send.go
// (live updates out: the fan-out, the window, ACK timeouts), receive.go (live updates in),
// round.go (sync rounds), resync.go, close.go (the close handshake), errors.go; hub.go and
// hubchannel.go (the hub: opening and bootstrap); targets.go (the target controller), peer.go
// and peerchannel.go (the peer: OPEN pacing, opening, bootstrap, rounds), recovery.go (failed
// targets), localwrites.go (the peer's local writes).
//
// # When a target fails (peer)
//
// A namespace that fails on the peer records, on its target, the error code that ended it
// and what follows, by that code's retry column in the error registry: a cause that heals
// by itself (a remote or internal error, a timeout, persistence degraded on the hub) is
// retried with backoff (RetryBase doubling to RetryMax), a cause an operator must remove (a
// size cap, a grant, a missing namespace) on a slower one, and a protocol violation not at
// all. A namespace has one lifecycle per connection, so a retry rebuilds the connection;
// every new connection opens the failed targets again, whatever made it.
//
// Local writes (the admin API's, the editors') go through the door first:
// TargetController.AdmitLocalWrite refuses those that could never replicate — to a
// conflicted replica, to one whose failure waits for an operator, or larger than the
// connection to the hub carries — and takes the others, offline ones included. What it
// took is counted (LocalWriteApplied) until the hub is known to hold it: its UPDATE
// acknowledged, or a round carried it (Unreplicated, TargetStatus.UnreplicatedBytes).
//
// # Goroutines
//
// Everything of one connection runs on that connection's owner goroutine, as the seam
// guarantees: no locks guard channel state. Hub.Sessions and the TargetController's methods
// may be called from any goroutine; the state they share with the connections is behind
// their mutexes.
//
// # Large payloads: chunked transfers
//
// When both ends negotiated CAP_CHUNKED_UPDATE (the v2 generation), a payload over its
// single-frame cap travels as a chunked transfer of UPDATE_CHUNK frames: the hub's snapshot
// over maxBootstrapBytes, a sync round's diff over maxSyncDiffBytes, a live update over
// maxUpdateBytes. The connection layer slices it as it sends, one chunk per namespace per
// round-robin turn (a large transfer does not hold up the small updates of other
// namespaces); it takes one slot of the namespace's window until the remote acknowledges its
// last chunk with the acknowledgement of the single-frame form (BOOTSTRAP_ACK, SYNC_APPLIED,
// UPDATE_ACK). The receiving connection's assembler checks every chunk — the declared sizes
// against the kind's caps before it allocates anything, the geometry, the order — and holds
// each transfer's bytes once, in a buffer of the declared size, until the transfer is whole
// and takes the single-frame path. A refused chunk fails its namespace with the kind's code
// (TOO_LARGE, VIOLATION); at most maxConcurrentAssembliesPerConnection transfers are received
// (and sent) at once per connection. An assembly that receives no chunk for assemblyTimeoutMs
// is discarded: a live update or a diff then resyncs (RESYNC_REQUIRED with
// UPDATE_TRANSFER_EXPIRED or SYNC_TRANSFER_EXPIRED — the round of an expired diff is given up
// and the peer starts another), a snapshot fails the bootstrap like its timer and the peer
// reconnects. A snapshot that keeps moving is not ended by the bootstrap timer, however long
// it takes: the timer is armed again while its chunks arrive (peer) or leave (hub). A close,
// an epoch fence, a resync, a drain or a lost connection discards the partial assemblies it
// concerns. Without the capability (a v1 side) the payload over its cap fails its namespace
// with BOOTSTRAP_TOO_LARGE or SYNC_DIFF_TOO_LARGE, or a live update is repaired by the next
// round, as the v1 generation does.
//
// A resync this side finds during a round is declared when the round ends: a
// RESYNC_REQUIRED makes the remote discard every partial assembly of the namespace, a diff
// of the round included, and the round could then never complete.
//
// Files: chunk.go (the receiving half, the assembly timer, the aborts); the sending half is in
// send.go, hubchannel.go and round.go.
package namespace
