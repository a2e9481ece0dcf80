package registry

// SavePoint says how far a namespace's store must be durable for its document, as it is
// at one point of the write sequence, to survive a crash of this node.
type SavePoint struct {
	// Seq is the last append sequence number of the namespace (on a hub cluster node, the
	// last log position applied): the document is saved once Flushed reaches it.
	Seq uint64
	// Unsaved reports that some change waits for a snapshot instead (the store refused its
	// append): Flushed reaching Seq does not cover it.
	Unsaved bool
}

// SavePointAsync reports, in a slot, the namespace's SavePoint: what an editor must wait
// for before it is told that an update which changed nothing — everything it carries is in
// the document already, perhaps from a write not durable yet — is saved. On a hub cluster
// node everything applied is durable (the log delivers only what a quorum stored): Seq is
// the position applied, and Flushed already covers it. done runs on the sequencer goroutine
// and must not block; it is not called when SavePointAsync returns an error.
func (l *Lease) SavePointAsync(done func(SavePoint, error)) error {
	return leaseOp(l, func(rt *nsRuntime, _ *slot) (SavePoint, error) {
		p := SavePoint{Seq: rt.through}
		if st := rt.store; st != nil {
			p.Unsaved = st.saved < st.unsaved
		}
		return p, nil
	}, done)
}
