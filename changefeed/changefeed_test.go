package changefeed

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nomicore/nomicore/persistence"
)

func TestCoalesce(t *testing.T) {
	ev := func(c uint64, k persistence.ChangeKind, ns string) Event {
		return Event{Cursor: c, Kind: k, NamespaceID: ns}
	}
	const u, cr, r, d = persistence.ChangeUpdated, persistence.ChangeCreated, persistence.ChangeRestored, persistence.ChangeDeleted
	in := []Event{ev(1, cr, "a"), ev(2, u, "a"), ev(3, u, "b"), ev(4, u, "a"), ev(5, r, "a"), ev(6, u, "a"), ev(7, u, "b"), ev(8, d, "b")}
	got := fmt.Sprint(cursors(Coalesce(in)))
	// 2 and 4 stand behind 6 (a), 3 behind 7 (b); creations, restores, deletions stay.
	if want := "[1 5 6 7 8]"; got != want {
		t.Fatalf("Coalesce = %s, want %s", got, want)
	}
	if got := Coalesce(in[:1]); len(got) != 1 {
		t.Fatalf("one event: %v", got)
	}
}

func cursors(es []Event) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Cursor
	}
	return out
}

func TestExpiredError(t *testing.T) {
	var err error = &ExpiredError{Cursor: 3, PrunedThrough: 10, Head: 20}
	if !errors.Is(err, ErrExpired) {
		t.Fatal("not ErrExpired")
	}
	if newer := (&ExpiredError{Cursor: 30, Head: 20}).Error(); newer == err.Error() {
		t.Fatal("a cursor newer than the head reads as an old one")
	}
}
