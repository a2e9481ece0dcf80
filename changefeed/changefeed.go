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
//   - a hub cluster derives it from the shared log (cluster.Node.ChangeFeed): the cursor is
//     the position of the log record, the same on every node, so a reader may resume on
//     any node. The log keeps, for every namespace, at least its newest records, so no
//     cursor expires there.
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

// Event is one change.
type Event struct {
	Cursor      uint64
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
	// Open starts a reader after cursor after; a cursor the feed cannot resume after is an
	// *ExpiredError.
	Open(ctx context.Context, after uint64) (Reader, error)
	// Head returns the cursor of the newest change: a reader that wants only what happens
	// from now on opens after it.
	Head(ctx context.Context) (uint64, error)
	// Latest calls fn with the newest change of every namespace the feed knows (for a
	// reader starting over) and returns the cursor to follow from after that.
	Latest(ctx context.Context, fn func(Event) error) (uint64, error)
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
// than its retention), or it never gave that cursor. The reader starts over: Source.Latest,
// then the feed after the cursor Latest returns.
type ExpiredError struct {
	Cursor        uint64
	PrunedThrough uint64 // the feed resumes after this cursor or a later one
	Head          uint64 // … up to this one
}

func (e *ExpiredError) Error() string {
	if e.Cursor > e.Head {
		return fmt.Sprintf("cursor %d is newer than the feed's newest change (%d): it is not a cursor of this hub's feed", e.Cursor, e.Head)
	}
	return fmt.Sprintf("cursor %d is older than the feed keeps (it resumes after %d or later)", e.Cursor, e.PrunedThrough)
}

// Unwrap gives ErrExpired.
func (e *ExpiredError) Unwrap() error { return ErrExpired }

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
