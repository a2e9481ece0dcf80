// Package yws is the editor endpoint of a Nomicore node: the y-websocket protocol that every
// stock Yjs editor speaks through the `y-websocket` provider, and the Hocuspocus protocol of
// `@hocuspocus/provider` (see "The Hocuspocus endpoint" below), served on the node's client
// listener, plus a minimal editor page. The editors of both protocols share one room per
// namespace on the node: its document, its awareness and its stateless messages.
//
// # The protocol
//
// An editor opens a WebSocket to /v1/yjs/{namespaceId} — the provider's
// `serverUrl + "/" + room`, so serverUrl is ws://HOST:PORT/v1/yjs and the room is the
// namespace id — with its client token as ?token= (browsers cannot set headers on a
// WebSocket) or an Authorization: Bearer header, which the node's authenticator
// (Options.Clients, an auth.ClientAuthenticator) checks before the upgrade and again when
// the node's tokens change (Revalidate). Each WebSocket message is one y-protocols message:
// a varUint type, then
//
//	0 sync:            varUint sub-type — 0 SyncStep1 (a state vector), 1 SyncStep2 (an
//	                   update), 2 Update (an update) — and varUint8Array payload
//	1 awareness:       varUint8Array of an awareness update: varUint count, then per client
//	                   varUint clientID, varUint clock, varString JSON state ("null" removes)
//	2 auth:            varUint 0 PermissionDenied, varString reason (node → editor only)
//	3 queryAwareness:  no payload (editor → node: send me every awareness state)
//	5 stateless:       varString payload, an application's message relayed to the room's
//	                   other editors, not stored (sent to a y-websocket editor only when it
//	                   connected with ?stateless=1: a stock provider has no handler for it)
//
// On connect the node sends its SyncStep1 and the awareness states it holds; it answers an
// editor's SyncStep1 with the SyncStep2 diff; the editor's SyncStep2 and Updates are
// written. Editors that ask from the same state — every fresh editor asks with the empty
// state vector — while the document does not change get the same encoded bytes, encoded
// once (registry.Lease.EncodeState) and written to each socket without a copy: a crowd
// joining a large document at once costs the node one encoding, not one per editor. Every editor hears something at least every KeepAlive (an empty awareness
// update when nothing else went out): the provider reconnects after 30 s of silence.
//
// # Writes
//
// An editor's update goes through the namespace's write sequencer exactly like an admin
// API write (registry.Lease.WriteLocalExceptAsync): the protected `meta` check, the live
// apply, the store, and so replication to the hub and its peers — on a node of a hub
// cluster, the namespace's log, which every node applies. One write per connection
// is in flight at a time, so a refusal is known before the next update, which may build on
// it. Accepted updates are relayed to the namespace's other editors on this node once the
// store has them on disk (in a cluster: once the log stored them on a quorum and this node
// applied them), so what an editor sees survives a crash of the node; the updates
// that become durable together go out merged into one message (the sender then gets its
// own update back within the merge, a no-op for Yjs, as with other relays). Updates
// that reach the namespace from elsewhere (replication, the admin API) are relayed as the
// registry's watch delivers them.
//
// On a peer, every update first passes the node's WriteGate: what could never reach the hub
// is not written. An update larger than the peer's connection to the hub carries (a hub of
// the v1 generation: maxUpdateBytes) is refused alone, like a protected write below; a
// replica that cannot replicate now (conflicted, or failed for a cause an operator must
// remove) closes the connection with 1013 and refuses new ones (409), so that the provider
// keeps the editor's changes and sends them again once the replica takes writes. Updates
// written are counted by the gate until the hub holds them.
//
// A read-only editor syncs and receives, but its changes are not applied: the node sends
// PermissionDenied once and keeps the socket open (a SyncStep2 that brings nothing new is
// not a change). An update that touches `meta` is refused the same way, with zero effect,
// counted and logged. Refusing an update leaves a gap in that Yjs client's clock, so its
// later updates could only wait in the document as pending structs, forever: the
// connection remembers the gap (the first refused clock of each client, at most
// MaxGapClients of them, forgotten when it closes) and drops those updates instead.
//
// # Awareness
//
// Awareness (cursors, names) is relayed among the editors of one namespace on one node,
// following y-protocols' rules, bounded in states per namespace and bytes per state; a
// closing connection's states are removed (announced as a null state with clock + 1), and
// so is a state not renewed within 30 s. A room relays awareness at most every 50 ms:
// changes that come faster go out together, each client's latest only — a provider
// repeats every change it hears, so this also bounds what editors send back. With a
// Presence (Options.Presence: the other nodes of a hub cluster, see package presence) the
// room also hands its editors' changes to other nodes and takes theirs into the same table;
// without one, awareness is node-local.
//
// # Limits and bad input
//
// Refusals before the upgrade are JSON {"code","message"}: 401 missing or unknown token,
// 403 namespace not granted, 404 namespace unknown to this node, 409 a conflicted replica,
// 409 REPLICA_FAILED a replica that waits for an operator, 503 not bootstrapped yet, over
// MaxClients, shutting down, or a credential that cannot be checked now. After the
// upgrade: a message over MaxMessageBytes closes with 1009, an unknown type with 1003,
// bytes that do not decode with 1007 — each with a log line, never a panic; going over one
// of the Limits (connections per user, messages, bytes and awareness updates per second of
// a connection, bytes of an awareness state) closes with 1008 and a reason naming it; a
// client whose send queue is full (beyond its first message, taken whole) is dropped (its
// socket closed at once) and resyncs when it reconnects, and so is one that reads nothing
// for WriteTimeout (a large message is written in frames of 1 MiB, each within it); a
// removed token closes its sockets with 4401, a narrowed grant with 4403 (the provider does
// not retry 44xx).
//
// # The Hocuspocus endpoint
//
// GET /v1/hocuspocus serves `@hocuspocus/provider` 3.x and 4.x: one socket carries many
// documents (package hocuspocus has the frames), each an editor of its namespace's room
// like a y-websocket connection. A document authenticates inside the socket with the
// provider's token, checked by Options.Clients like a y-websocket editor's: Authenticated
// (scope read-write or readonly) or PermissionDenied with the reason. Its frames are held
// until then, bounded per socket (Options.Hocuspocus). Its updates go through the same
// write door; each is acknowledged with SyncStatus 1 only once durable on the node (the
// relay's WaitFlushed), and a refused one with SyncStatus 0. A document's own trouble
// closes it alone (a CLOSE frame: Unauthorized, Forbidden, Reset Connection); what asks the
// provider to come back closes the socket, so that every document resyncs. A socket that
// authenticates nothing, or goes quiet, for Options.Hocuspocus.Timeout is closed with 4408.
// A provider may send its token again (a refresh); stateless messages are relayed to the
// room's other editors that take them.
//
// # The editor page
//
// GET /edit/{namespaceId} serves a text area bound to Y.Text("body") through the same
// provider; its scripts are embedded in the binary (editor/yjs-bundle.js is generated from
// the pinned npm packages by `make editor-bundle`, and a test checks it is up to date).
package yws
