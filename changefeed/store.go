package changefeed

import (
	"context"
	"errors"
	"strconv"

	"github.com/nomicore/nomicore/persistence"
)

// StoreSource is the feed of a single hub: the change feed of its store.
type StoreSource struct {
	Feed persistence.ChangeFeed
}

var _ Source = StoreSource{}

// storeCursor is the cursor of a single hub's feed: its record number in decimal, the
// form the API has always shown.
func storeCursor(n uint64) Cursor { return Cursor(strconv.FormatUint(n, 10)) }

// storeWant is what a single hub's cursor looks like, for BadCursorError.
const storeWant = "a whole number"

// parseStoreCursor reads a single hub's cursor.
func parseStoreCursor(c Cursor) (uint64, error) {
	n, err := strconv.ParseUint(string(c), 10, 64)
	if err != nil {
		return 0, &BadCursorError{Cursor: string(c), Want: storeWant}
	}
	return n, nil
}

func eventOf(c persistence.Change) Event {
	e := Event{Kind: c.Kind, Owner: c.Owner, NamespaceID: c.NamespaceID, StateVector: c.StateVector, At: c.At}
	if c.Cursor > 0 {
		e.Cursor = storeCursor(c.Cursor)
		e.ID = string(e.Cursor)
	}
	return e
}

// ParseCursor implements Source: a decimal number, given back in its shortest form.
func (s StoreSource) ParseCursor(c string) (Cursor, error) {
	n, err := parseStoreCursor(Cursor(c))
	if err != nil {
		return "", err
	}
	return storeCursor(n), nil
}

// Open implements Source.
func (s StoreSource) Open(ctx context.Context, after Cursor) (Reader, error) {
	pos, err := parseStoreCursor(after)
	if err != nil {
		return nil, err
	}
	// Check the cursor now, so that the caller can answer before it starts a stream.
	if _, b, err := s.Feed.Changes(ctx, pos, 1); err != nil {
		if errors.Is(err, persistence.ErrCursorExpired) {
			return nil, expired(pos, b)
		}
		return nil, err
	}
	return &storeReader{feed: s.Feed, pos: pos}, nil
}

func expired(pos uint64, b persistence.ChangeBounds) *ExpiredError {
	return &ExpiredError{Cursor: storeCursor(pos), PrunedThrough: storeCursor(b.PrunedThrough), Head: storeCursor(b.Head), Newer: pos > b.Head}
}

// Head implements Source.
func (s StoreSource) Head(ctx context.Context) (Cursor, error) {
	_, b, err := s.Feed.Changes(ctx, 0, 1)
	if errors.Is(err, persistence.ErrCursorExpired) {
		err = nil
	}
	return storeCursor(b.Head), err
}

// Latest implements Source.
func (s StoreSource) Latest(ctx context.Context, fn func(Event) error) (Cursor, error) {
	b, err := s.Feed.LatestChanges(ctx, func(c persistence.Change) error { return fn(eventOf(c)) })
	return storeCursor(b.Head), err
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
		return nil, expired(r.pos, b)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(changes))
	for i, c := range changes {
		out[i] = eventOf(c)
	}
	if len(changes) > 0 {
		r.pos = changes[len(changes)-1].Cursor
	}
	return out, nil
}

func (r *storeReader) Wake() <-chan struct{} { return r.feed.ChangesWake() }

func (r *storeReader) Close() {}
