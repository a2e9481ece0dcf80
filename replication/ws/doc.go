// Package ws is the replication connection layer: the hub's /v1/replication endpoint and the
// peer's connection controller over WebSocket (github.com/coder/websocket), carrying NMCR
// frames (package protocol) for the namespace layer built on top.
//
// # Hub
//
// Hub is an http.Handler. The bearer token is checked by the Authenticator before the
// upgrade (§2): 401 for a missing or unknown token, 403 for a known token that may not
// replicate, 503 when the authenticator is missing or slower than authTimeoutMs; no WebSocket
// is created then, and each refusal is an auth-upgrade-rejected event (§23.1). The
// authenticator yields the trusted peer instance id; the HELLO must repeat it (§2, §6).
// TokenTable is the in-memory authenticator over SHA-256 token hashes (constant-time
// comparison; Replace swaps the table atomically; Revoke reports revocations).
//
// Each connection goes upgraded → handshaking → ready → draining → closed (§15.2): HELLO
// within helloTimeoutMs, identities and versions checked, HELLO_ACK with the nonce echoed
// and a connection id for observability. Hub.GoAway drains connections (§6.3); revocations
// end namespaces or drain the peer with REAUTH_REQUIRED (§19); Hub.Shutdown closes every
// transport with 1001 without GOAWAY and waits for admitted work (§21, issue #229).
//
// # Peer
//
// Peer is the §15.1 controller: stopped, disconnected, connecting, handshaking, ready,
// draining, backoff, blocked, with full-jitter backoff (BackoffDelay) from an injected
// random source and clock. Close classification: 1002, 1008 (and every connection error whose
// registry retry is no or config) block; 1011 backs off, at a slow cadence after repeated
// failures; GOAWAY SERVER_RESTARTING reconnects after retryAfterMs + jitter;
// SERVER_SHUTTING_DOWN and REAUTH_REQUIRED block until Start or ConfigChanged; a 1001
// without GOAWAY, a lost socket, a hello or pong timeout back off.
//
// # One connection
//
// Every connection, on either side, has three goroutines:
//
//   - the owner, which holds all connection state: the state machine, the negotiated
//     capabilities, both sequence directions, the timers, the outbound queues and their
//     accounting, the OPEN admission, and the namespace layer's Handler, which it calls;
//   - the reader, which reads whole messages (at most maxFrameBytes, never more into
//     memory) and hands them to the owner through a bounded channel: when the owner falls
//     behind, the reader stops reading and TCP pushes back on the remote;
//   - the writer, which writes the frames the owner hands it, in order. The owner stamps
//     sequences at hand-off, so sequence order is write order, and counts the bytes handed
//     over and not yet written ("unflushed": coder/websocket has no bufferedAmount).
//
// A short-lived fourth goroutine runs each WebSocket ping. Timers run through the injected
// clock and only post to the owner. Closing is one decision on the owner (§18): the epoch is
// invalidated (no timer, pong or frame acts afterwards), the handler is told, and the writer
// sends a best-effort connection ERROR and closes the transport with the code of §13.1/§14.
//
// # The namespace seam
//
// The namespace layer plugs in as a NamespaceFactory, called on the owner goroutine when a
// connection becomes ready; the Handler it returns receives, on that goroutine:
//
//   - HandleFrame: every inbound namespace-scope frame, already checked for envelope,
//     sequence, payload, direction, HELLO-first, OPEN admission, the drain filter and
//     acknowledgement correlation;
//   - HandleRejected: a frame that failed a namespace-scope size cap;
//   - HandleDrain, HandleShed, HandleRevoked, HandleClosed: connection events.
//
// It acts through the Session: Send for control frames (stamped at once, ahead of queued
// data, returning the sequence), an Outbox per namespace for data (UPDATEs, and chunked
// snapshots, sync diffs and large updates, framed lazily one per round-robin turn, with a
// window gate and a Sent callback carrying the sequence to expect in the ACK), AfterFunc
// timers, Post for completions from other goroutines, BeginWork to hold the hub's shutdown
// for admitted work, Fail for connection errors, Quiesced to end a drain, Reconnect (peer)
// for namespace recovery.
//
// # The namespace layer (§7–§12, §16, §19, §20)
//
// HubNamespaces (hub) and TargetController (peer) are the namespace layer over that seam.
// Per connection, each keeps one channel per namespace: the hub's nine states (opening,
// bootstrapping, reconciling, live, needs-resync, closing, closed, conflicted, failed) or
// the peer's eleven of §16 (targeted and disconnected besides). A channel holds a registry
// lease and a replication session; every remote apply runs in the namespace's write
// sequencer and is acknowledged when it settled; the runtime's document observer fans
// applied updates out to the other sessions, which pull them into their Outbox — the
// bounded unsent queue, merged with yjs.MergeUpdates while its gate (live, and a free slot
// in the window of maxInFlightUpdates) is closed. The peer starts every sync round (§9):
// after an open, after a resync once its window is empty, and periodically; a loss of
// continuity (queue overflow, shed, ACK timeout) is declared and repaired by the next
// round. Registry calls that may block (open, import) run off the connection goroutine
// and post their results back. This layer runs the v1 generation: configure
// protocol.GenerationV1 (no UPDATE_CHUNK yet).
//
// # Backpressure (§17)
//
// Control frames go to the writer at once; their unflushed bytes are bounded by
// maxQueuedControlBytes (exhausted: CONNECTION_BACKPRESSURE, 1011). Data frames leave the
// namespace queues round-robin, one per namespace per turn, skipping namespaces whose gate is
// closed, and pause at the high watermark of unflushed bytes until the low one
// (send-paused, send-resumed). A namespace queue over maxQueuedUpdateBytes or
// maxQueuedUpdateCount is dropped (ErrQueueOverflow); queued plus unflushed bytes over
// maxQueuedBytesPerConnection shed the largest queues to the low watermark (HandleShed, or
// ErrConnectionShed for the enqueuing namespace). A slow peer stalls only its own
// connection's writer.
package ws
