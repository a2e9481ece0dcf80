package changefeed

import (
	"context"
	"time"

	"github.com/nomicore/nomicore/persistence"
)

// StateVectorLookup returns the state vector of namespace (owner, ns) once the node applied
// its log through position pos (registry.Lease.StateVectorAt, on a hub cluster's node).
type StateVectorLookup func(ctx context.Context, owner, ns string, pos uint64) ([]byte, error)

// lookupTimeout bounds one lookup: a namespace that does not load in time is reported
// without its state vector rather than holding the feed up.
const lookupTimeout = 10 * time.Second

// WithStateVectors returns src whose readers fill in the state vector of the "updated"
// events that come without one (a hub cluster's log records), with lookup. Each page of
// events is coalesced first (Coalesce), so a namespace written many times in a page is
// looked up once.
func WithStateVectors(src Source, lookup StateVectorLookup) Source {
	return svSource{Source: src, lookup: lookup}
}

type svSource struct {
	Source
	lookup StateVectorLookup
}

func (s svSource) Open(ctx context.Context, after Cursor) (Reader, error) {
	r, err := s.Source.Open(ctx, after)
	if err != nil {
		return nil, err
	}
	return &svReader{Reader: r, lookup: s.lookup}, nil
}

type svReader struct {
	Reader
	lookup StateVectorLookup
}

func (r *svReader) Next(ctx context.Context, limit int) ([]Event, error) {
	events, err := r.Reader.Next(ctx, limit)
	if err != nil || len(events) == 0 {
		return events, err
	}
	events = Coalesce(events)
	for i := range events {
		e := &events[i]
		if e.StateVector != nil || e.Kind != persistence.ChangeUpdated {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		sv, err := r.lookup(lctx, e.Owner, e.NamespaceID, e.Pos)
		cancel()
		if err == nil {
			e.StateVector = sv
		}
	}
	return events, nil
}
