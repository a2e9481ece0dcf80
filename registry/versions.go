package registry

import (
	"context"

	"github.com/nomicore/nomicore/yjs"
)

// Capture returns the document's whole state and its state vector, read in one slot (the
// state of a version). The state's bytes may be shared with other readers: never modify
// them.
func (l *Lease) Capture(ctx context.Context) (state, stateVector []byte, err error) {
	type captured struct{ state, sv []byte }
	c, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (captured, error) {
		st, err := rt.encodeState(nil)
		return captured{st, rt.doc.EncodeStateVector()}, err
	})
	return c.state, c.sv, err
}

// StateVectorAt returns the document's state vector once this node applied the namespace
// log through position pos (a hub cluster's node; on a single hub or a peer it is the
// current state vector): the state vector after the record at pos, or after a later one.
func (l *Lease) StateVectorAt(ctx context.Context, pos uint64) ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if l.rt.sh != nil && l.rt.applied.Load() < pos {
		if err := l.rt.waitApplied(ctx, pos); err != nil {
			return nil, err
		}
	}
	return l.StateVector(ctx)
}

// RenderJSON renders a document state (a version's, say) as Lease.JSON renders the live
// document: every root as Yjs infers it, or only the roots given, each as the kind given.
func RenderJSON(state []byte, roots ...Root) (map[string]any, error) {
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return nil, ErrInternal.with("the state does not decode", err)
	}
	if len(roots) == 0 {
		return doc.ToJSON(), nil
	}
	return renderRoots(doc, roots)
}
