package changefeed

import (
	"context"
	"errors"

	"github.com/nomicore/nomicore/persistence"
)

// StoreSource is the feed of a single hub: the change feed of its store.
type StoreSource struct {
	Feed persistence.ChangeFeed
}

var _ Source = StoreSource{}

func eventOf(c persistence.Change) Event {
	return Event{Cursor: c.Cursor, Kind: c.Kind, Owner: c.Owner, NamespaceID: c.NamespaceID, StateVector: c.StateVector, At: c.At}
}

// Open implements Source.
func (s StoreSource) Open(ctx context.Context, after uint64) (Reader, error) {
	// Check the cursor now, so that the caller can answer before it starts a stream.
	if _, b, err := s.Feed.Changes(ctx, after, 1); err != nil {
		if errors.Is(err, persistence.ErrCursorExpired) {
			return nil, &ExpiredError{Cursor: after, PrunedThrough: b.PrunedThrough, Head: b.Head}
		}
		return nil, err
	}
	return &storeReader{feed: s.Feed, pos: after}, nil
}

// Head implements Source.
func (s StoreSource) Head(ctx context.Context) (uint64, error) {
	_, b, err := s.Feed.Changes(ctx, 0, 1)
	if errors.Is(err, persistence.ErrCursorExpired) {
		err = nil
	}
	return b.Head, err
}

// Latest implements Source.
func (s StoreSource) Latest(ctx context.Context, fn func(Event) error) (uint64, error) {
	b, err := s.Feed.LatestChanges(ctx, func(c persistence.Change) error { return fn(eventOf(c)) })
	return b.Head, err
}

// Record implements Source.
func (s StoreSource) Record(ctx context.Context, e Event) error {
	_, err := s.Feed.RecordChange(ctx, persistence.Change{Kind: e.Kind, Owner: e.Owner, NamespaceID: e.NamespaceID, StateVector: e.StateVector})
	return err
}

// storeReader reads the store's feed from pos on.
type storeReader struct {
	feed persistence.ChangeFeed
	pos  uint64
}

func (r *storeReader) Next(ctx context.Context, limit int) ([]Event, error) {
	changes, b, err := r.feed.Changes(ctx, r.pos, limit)
	if errors.Is(err, persistence.ErrCursorExpired) {
		// The retention dropped records the reader had not read yet.
		return nil, &ExpiredError{Cursor: r.pos, PrunedThrough: b.PrunedThrough, Head: b.Head}
	}
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(changes))
	for i, c := range changes {
		out[i] = eventOf(c)
	}
	if len(out) > 0 {
		r.pos = out[len(out)-1].Cursor
	}
	return out, nil
}

func (r *storeReader) Wake() <-chan struct{} { return r.feed.ChangesWake() }

func (r *storeReader) Close() {}
