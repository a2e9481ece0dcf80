// Package changefeed is the hub's change feed as applications read it: one ordered, durable
// list of what happened to the namespaces — created, updated, restored, deleted — each with
// the namespace's state vector after the change, numbered by a cursor. A reader resumes
// after any cursor it was given and gets every change after it, also after a crash of the
// node: the feed is written with the changes themselves, before they are acknowledged.
//
// Where the feed lives depends on the hub:
//
//   - a single hub keeps it in its store (persistence.ChangeFeed: a record in the group
//     commit that makes updates durable, one per namespace and commit, and one in the
//     transaction of each creation and deletion); StoreSource reads
//     it. Records older than the store's retention are dropped, and a cursor before them is
//     expired (ErrExpired).
//   - a hub cluster derives it from the shared log (cluster.Node.ChangeFeed), which is
//     spread over several streams: the cursor names a position in each of them, the same
//     on every node, so a reader may resume on any node. The log keeps, for every
//     namespace, at least its newest records, so no cursor expires there.
//
// A cursor is opaque to readers (Cursor): each Source reads and writes its own (a single
// hub's is a decimal number, a cluster's a token), and ParseCursor tells a cursor of the
// feed from anything else.
//
// Several writes may share one event ("updated" events coalesce: an event stands for
// every write of its namespace up to it), but after every acknowledged write there is at
// least one event of its namespace.
package changefeed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nomicore/nomicore/persistence"
)

// Cursor is a position in the feed as the feed gives it — a reader keeps it and resumes
// after it, and compares it with nothing. A single hub's is a decimal number (the same as
// before the feed had other kinds); a hub cluster's a token naming a position in each of
// its log streams (cluster.Node.ChangeFeed). Source.ParseCursor reads one a reader gave.
type Cursor string

// Event is one change.
type Event struct {
	// Cursor is the feed's position after this change: resuming after it gives every
	// later change. "" for the list of Source.Latest.
	Cursor Cursor
	// ID names the change the same on every node and at every read (a webhook's delivery
	// id): a single hub's is its cursor; on a hub cluster, whose cursors depend on how the
	// reader merged the log streams, it names the change's record. "" for Latest's list.
	ID string
	// Pos is the position of the change's record in its namespace's log (a hub cluster's
	// stream sequence), which StateVectorLookup takes; 0 when there is none.
	Pos         uint64
	Kind        persistence.ChangeKind
	Owner       string // the namespace's owner (storage partition); not shown to applications
	NamespaceID string
	// StateVector is the namespace's encoded state vector after the change: a reader that
	// holds a copy of the document asks for what it lacks with it (GET …/update?sv=). On a
	// hub cluster it may also cover later changes of the namespace (which have events of
	// their own). Nil for a deletion, and when it could not be read.
	StateVector []byte
	At          time.Time
}

// Source is where a node reads its feed.
type Source interface {
	// ParseCursor reads a cursor a reader gave (?after=, Last-Event-ID, a saved one): the
	// feed's own form of it, or a *BadCursorError when it is not a cursor of this feed's
	// kind. It never fails on a cursor the feed gave.
	ParseCursor(s string) (Cursor, error)
	// Open starts a reader after cursor after (one ParseCursor accepted); a cursor the feed
	// cannot resume after is an *ExpiredError.
	Open(ctx context.Context, after Cursor) (Reader, error)
	// Head returns the cursor of the newest change: a reader that wants only what happens
	// from now on opens after it.
	Head(ctx context.Context) (Cursor, error)
	// Latest calls fn with the newest change of every namespace the feed knows (for a
	// reader starting over) and returns the cursor to follow from after that.
	Latest(ctx context.Context, fn func(Event) error) (Cursor, error)
	// Record writes a change that no write carries: a restore (after the restoring write
	// was acknowledged). A deletion needs none: the delete writes its change itself.
	Record(ctx context.Context, e Event) error
}

// Reader reads the feed from a position on. It is not safe for concurrent use.
type Reader interface {
	// Next returns at most limit events after the reader's position, oldest first, and
	// moves past them; none when nothing newer is there yet.
	Next(ctx context.Context, limit int) ([]Event, error)
	// Wake returns a channel that is closed when Next may have more, for a change made
	// after the call (take it before calling Next).
	Wake() <-chan struct{}
	// Close releases the reader.
	Close()
}

// ErrExpired is the kind of ExpiredError.
var ErrExpired = errors.New("changefeed: cursor expired")

// ExpiredError: the feed cannot resume after Cursor — it dropped records after it (older
// than its retention), or it never gave that cursor (Newer). The reader starts over:
// Source.Latest, then the feed after the cursor Latest returns.
type ExpiredError struct {
	Cursor        Cursor
	PrunedThrough Cursor // the feed resumes after this cursor or a later one
	Head          Cursor // … up to this one
	// Newer: Cursor is past the feed's newest change (in some log stream, on a cluster).
	Newer bool
}

func (e *ExpiredError) Error() string {
	if e.Newer {
		return fmt.Sprintf("cursor %s is newer than the feed's newest change (%s): it is not a cursor of this hub's feed", e.Cursor, e.Head)
	}
	return fmt.Sprintf("cursor %s is older than the feed keeps (it resumes after %s or later)", e.Cursor, e.PrunedThrough)
}

// Unwrap gives ErrExpired.
func (e *ExpiredError) Unwrap() error { return ErrExpired }

// ErrBadCursor is the kind of BadCursorError.
var ErrBadCursor = errors.New("changefeed: not a cursor")

// BadCursorError: a cursor that is not one this feed gives (garbage, or a token of another
// kind of feed). The API answers it 400; a saved cursor that reads so is replaced by the
// feed's head.
type BadCursorError struct {
	Cursor string
	Want   string // what the feed's cursors look like, e.g. "a whole number"
}

func (e *BadCursorError) Error() string {
	c := e.Cursor
	if len(c) > 64 {
		c = c[:64] + "…"
	}
	return fmt.Sprintf("%q is not a cursor of this hub's change feed: it must be a cursor the feed gave (%s)", c, e.Want)
}

// Unwrap gives ErrBadCursor.
func (e *BadCursorError) Unwrap() error { return ErrBadCursor }

// Coalesce drops every "updated" event followed, in events, by another "updated" event of
// the same namespace: the later one stands for both (its state vector covers the earlier
// change). The order of what remains is kept.
func Coalesce(events []Event) []Event {
	if len(events) < 2 {
		return events
	}
	laterUpdate := map[string]bool{}
	keep := make([]bool, len(events))
	n := 0
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Kind == persistence.ChangeUpdated {
			if laterUpdate[e.NamespaceID] {
				continue
			}
			laterUpdate[e.NamespaceID] = true
		}
		keep[i] = true
		n++
	}
	if n == len(events) {
		return events
	}
	out := make([]Event, 0, n)
	for i, e := range events {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}
