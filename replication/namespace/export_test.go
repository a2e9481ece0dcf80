package namespace

import "github.com/nomicore/nomicore/replication/protocol"

// MergeUpdates lets the external tests count the merges coalescing makes.
var MergeUpdates = &mergeUpdates

// CoalesceQuickAck lets the external tests make every acknowledgement slow (0): small
// updates then use coalesceInFlight UPDATEs whatever the round trip.
var CoalesceQuickAck = &coalesceQuickAck

// HubDeletedStarting lets the external tests hold the deletion a hub's NAMESPACE_DELETED
// starts on a peer.
var HubDeletedStarting = &hubDeletedStarting

// HubDeleted acts on a hub's NAMESPACE_DELETED for the target of id, as the connection does.
func (tc *TargetController) HubDeleted(id string) {
	ns, err := protocol.ParseNamespaceID(id)
	if err != nil {
		panic(err)
	}
	tc.mu.Lock()
	tg := tc.targets[ns]
	tc.mu.Unlock()
	tc.hubDeleted(tg)
}
