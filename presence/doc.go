// Package presence carries editors' awareness (cursors, selections, names) between the
// nodes of a Nomicore deployment, so that two people editing one document see each other
// whichever node their editors are attached to. The editor endpoint (package yws) keeps
// each namespace's awareness table and hands its Presence the changes of its own editors;
// this package moves them.
//
// Cluster relays awareness among the nodes of a hub cluster over NATS core subjects — never
// the durable log: presence is ephemeral and is never stored. A node subscribes to a
// namespace's presence subject only while it has editors on that namespace, so nothing is
// sent for documents no one edits:
//
//	nomicore.presence.<owner, base64url>.<namespaceId>
//
// Each message carries headers naming the node it comes from, the link of that node (a
// node's namespace may close and open again: a leave removes only what its own link
// announced) and its kind:
//
//	update  a y-protocols awareness update of that node's editors' states (a null state
//	        removes one); at most one per namespace every RelayInterval, each client's latest
//	        state only
//	query   a node that just got its first editor of the namespace asks for every state,
//	        and once more a second later (a subscription reaches the cluster's other NATS
//	        servers asynchronously: a node that joined a moment before may have missed the
//	        first); each other node answers with an update of its editors' states
//	leave   the node has no editor of the namespace any more (its last one left, or it is
//	        shutting down): the others remove every state it announced
//
// Replication relays awareness over the replication connections (the presence extension):
// a hub between its editors and its peers, and between its peers. On a cluster node with
// peers it joins the Cluster relay as its upstream: the node announces there its editors'
// and its peers' states, and hands the other nodes' to its editors and its peers.
//
// A node that dies sends nothing: the others remove its editors' states when they are not
// renewed within the awareness timeout (30 s, as y-protocols; providers renew every 15 s,
// and the renewals are relayed like any change).
package presence
