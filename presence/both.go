package presence

import "github.com/nomicore/nomicore/yws"

// Both is the yws.Presence of a node with two relays (a hub cluster node with peers: the
// cluster's relay among the nodes, and the replication connections' relay to its peers):
// each room joins both, its editors' changes go to both, and both give it what they hear.
func Both(a, b yws.Presence) yws.Presence { return both{a, b} }

type both struct{ a, b yws.Presence }

func (p both) Join(owner, ns string, remote yws.RemoteStates) yws.PresenceLink {
	return bothLinks{p.a.Join(owner, ns, remote), p.b.Join(owner, ns, remote)}
}

type bothLinks struct{ a, b yws.PresenceLink }

func (l bothLinks) Publish(entries []yws.AwarenessEntry) {
	l.a.Publish(entries)
	l.b.Publish(entries)
}

func (l bothLinks) Close() {
	l.a.Close()
	l.b.Close()
}
