// Package ws is the connection layer of replication: one WebSocket between the hub and a
// peer, carrying the binary frames of package protocol. The hub side is Hub, an
// http.Handler for /v1/replication; the peer side is Peer, a controller that dials the hub,
// keeps the connection up and backs off when it fails. What travels on a connection — the
// namespaces, one Yjs document each — is the namespace layer's business (package
// namespace); this package meets it only through package seam.
//
// # Connecting
//
// Before anything else the hub applies its admission control (admission.go): while too many
// connections are in their handshake, or too many namespace opens are in progress across
// all connections, a new upgrade is refused with 503 and a Retry-After, so that a fleet of
// peers returning after an outage spreads itself over the time the hub needs; nothing
// queues. It then checks the peer's bearer token before the WebSocket upgrade, with an
// Authenticator: 401 for a missing or unknown token, 403 for a known token that may not
// replicate, 503 when there is nothing to check against or the check is too slow; no
// WebSocket is created then. The authenticator yields the peer's instance id, which the
// peer's HELLO must repeat. Package auth implements it: the hub binary's is the tokens
// file's reloader (auth.Reloader), SHA-256 hashes of the tokens compared in constant time.
//
// A connection then goes upgraded → handshaking → ready → draining → closed. The handshake
// (HELLO, HELLO_ACK) checks both instance ids and agrees on a protocol version and
// capabilities; when it completes, the namespace layer of the connection is created
// (seam.NamespaceFactory). A GOAWAY drains the connection: it finishes what it started,
// takes no new work, and closes once its namespaces have all ended or at a deadline. Hub
// has GoAway (restarts) and Shutdown (which closes every connection at once with 1001 and
// waits for the work it had admitted).
//
// The peer's controller moves through stopped, disconnected, connecting, handshaking, ready,
// draining, backoff and blocked. After a connection ends it dials again — at the next of its
// hub URLs, when it has several — after a full-jitter backoff (BackoffCap, BackoffDelay):
// growing with each failure, but never more than half the time the peer has been without a
// working connection, and starting over once a connection has its targets live; slower
// after repeated server errors; as a busy hub's Retry-After asks. It blocks — until Start or
// ConfigChanged — when retrying cannot help: a refused token, an incompatible hub, a
// protocol error, a hub that asked it to stay away. A hub that asks it to authenticate again
// (a rotated token) gets one immediate dial with the token the peer has now.
//
// # One connection, three goroutines
//
// Every connection, on either side, has three goroutines, two of which run only while they
// have work — an idle connection is one parked reader:
//
//   - the owner, which holds all connection state — the state machine, the negotiated
//     capabilities, both sequence directions, the timers, the outbound queues and their
//     accounting, OPEN admission — and calls the namespace layer's Handler, one call at a
//     time. An inbound message or a posted function starts it when none runs; it exits
//     after a short linger without work. At most one runs at a time;
//   - the reader, which reads whole messages (at most maxFrameBytes, never more into
//     memory) and hands them to the owner through a bounded channel: when the owner falls
//     behind, the reader stops and TCP pushes back on the remote;
//   - the writer, which writes the frames the owner hands it, in order, and runs while it
//     has frames to write. The owner stamps each frame's sequence when it hands it over,
//     so sequence order is write order, and it counts the bytes handed over and not yet
//     written ("unflushed"; coder/websocket has no bufferedAmount). The writer writes
//     every frame it has into one batch and flushes it with one write(2): the socket under
//     coder/websocket is corked while it writes (cork.go).
//
// Each WebSocket ping runs in a short-lived goroutine of its own. Timers run on the
// injected clock and only post to the owner. Closing is one decision, on the owner: the
// connection's epoch ends (no timer, pong or frame acts afterwards), the namespace layer is
// told, and the writer sends a best-effort ERROR frame and closes the transport with the
// code the error registry gives. A pong late behind data on a link that is still moving
// bytes gets more time; a link on which nothing moves for pongTimeoutMs is closed
// (liveness.go).
//
// The files follow that design: conn.go (the connection and its owner goroutine), read.go
// (the reader and the routing of inbound frames), ack.go (acknowledgements), admission.go
// (the hub's admission control and OPEN_NAMESPACE admission), handshake.go, drain.go,
// close.go, control.go (control frames), scheduler.go (the data queues), write.go (the
// writer), cork.go (the batching socket), liveness.go (pings), session.go (the namespace
// layer's handle on a connection); hub.go is the hub, peer.go and backoff.go the peer's
// controller.
//
// # Checks on every inbound frame
//
// Before a namespace frame reaches the namespace layer the connection has checked its
// envelope, sequence and payload (protocol.Inbound), that the remote may send its type
// (protocol.MessageRule.Direction), that the handshake is complete, the drain filter (a
// draining connection takes no frame that would start work), the hub's OPEN admission (at
// most maxConcurrentOpens opens at once; later frames of those namespaces wait, at most
// maxEarlyFrames of them), and, for an acknowledgement, that it names a frame this side sent
// and still awaits, of the right type and namespace. Anything else is a connection error,
// which closes the connection.
//
// # Backpressure
//
// Control frames go to the writer at once, ahead of data; their unflushed bytes are bounded
// by maxQueuedControlBytes, and exhausting that reserve closes the connection
// (CONNECTION_BACKPRESSURE, 1011). Data frames (UPDATE, UPDATE_CHUNK) wait in one queue per
// namespace and leave round-robin, one frame per namespace per turn, skipping namespaces
// whose window is full, and only while the unflushed bytes are below the high watermark
// (then they wait for the low one). A namespace's live updates over maxQueuedUpdateBytes or
// maxQueuedUpdateCount are dropped (seam.ErrQueueOverflow); when queued plus unflushed bytes
// would pass maxQueuedBytesPerConnection, the largest queues of live updates are shed
// (seam.Handler.HandleShed, seam.ErrConnectionShed). A snapshot or sync diff too large for
// one frame waits in its namespace's queue ahead of the updates not yet started, bounded by
// its kind's chunked cap: it is the one transfer of a bootstrap or a round, never shed. A
// chunked transfer takes one window slot and leaves one chunk per turn; at most
// maxConcurrentAssembliesPerConnection are in progress on a connection, the most the
// receiver assembles at once. A slow peer stalls only its own connection.
package ws
