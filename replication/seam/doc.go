// Package seam is the boundary between the two layers of replication: the connection layer
// (package ws), which runs one WebSocket to the remote instance, and the namespace layer
// (package namespace), which replicates the documents multiplexed on it, one channel per
// namespace. It holds only the types both layers share and no behaviour, so that the
// compiler keeps the namespace layer from reaching into connections: package namespace
// imports this package and never ws.
//
// # The two directions of the seam
//
// When a connection has completed its handshake, the connection layer calls the
// NamespaceFactory once and gets back the Handler of that connection. From then on every
// input of the namespace layer arrives through the Handler, one call at a time, on the
// connection's owner goroutine:
//
//   - HandleFrame: a namespace frame the connection has already checked — envelope,
//     sequence, payload, who may send it, the handshake, the admission of OPEN_NAMESPACE,
//     the drain filter and, for acknowledgements, that they name a frame this side sent;
//   - HandleRejected: a frame over one of the namespace size caps;
//   - HandleDrain, HandleShed, HandleRevoked, HandleClosed: things that happened to the
//     connection (a GOAWAY, backpressure dropped a namespace's queue, the authenticator
//     withdrew namespaces, the connection ended).
//
// The namespace layer acts through the Session it was given: Send for control frames (sent
// at once, ahead of queued data), an Outbox per namespace for data (live updates and chunked
// transfers, sent round-robin across namespaces within each namespace's window), AfterFunc
// for timers, Post to come back to the owner goroutine from elsewhere, BeginWork to make
// the hub's shutdown wait for admitted work, Fail to close the connection with a protocol
// error, Quiesced to end a drain early, and Reconnect (peer) to rebuild the connection.
//
// # One goroutine
//
// Everything a Handler touches from its methods, from posted functions and from timer
// callbacks runs on the connection's owner goroutine, one call at a time and never
// re-entrantly, so the namespace layer needs no locks for per-connection state. Only
// Session.Post and Session.BeginWork may be called from other goroutines. No Handler method
// may block: slow work (the registry's write sequencer, storage) runs elsewhere and reports
// back with Post.
package seam
