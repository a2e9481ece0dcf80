package changefeed

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nomicore/nomicore/persistence"
)

func TestCoalesce(t *testing.T) {
	ev := func(c uint64, k persistence.ChangeKind, ns string) Event {
		return Event{Cursor: storeCursor(c), Kind: k, NamespaceID: ns}
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

func cursors(es []Event) []Cursor {
	out := make([]Cursor, len(es))
	for i, e := range es {
		out[i] = e.Cursor
	}
	return out
}

func TestExpiredError(t *testing.T) {
	var err error = &ExpiredError{Cursor: "3", PrunedThrough: "10", Head: "20"}
	if !errors.Is(err, ErrExpired) {
		t.Fatal("not ErrExpired")
	}
	if want := "cursor 3 is older than the feed keeps (it resumes after 10 or later)"; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
	if newer, want := (&ExpiredError{Cursor: "30", Head: "20", Newer: true}).Error(), "cursor 30 is newer than the feed's newest change (20): it is not a cursor of this hub's feed"; newer != want {
		t.Fatalf("%q, want %q", newer, want)
	}
}

// TestStoreCursor: a single hub's cursor is the decimal number it always was; anything
// else is a *BadCursorError, a cluster's token included.
func TestStoreCursor(t *testing.T) {
	var s StoreSource
	for in, want := range map[string]Cursor{"0": "0", "17": "17", "007": "7", "18446744073709551615": "18446744073709551615"} {
		if got, err := s.ParseCursor(in); err != nil || got != want {
			t.Errorf("ParseCursor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "+1", "1.5", "c1.5", "18446744073709551616", " 1", "x"} {
		_, err := s.ParseCursor(in)
		var bad *BadCursorError
		if !errors.As(err, &bad) || !errors.Is(err, ErrBadCursor) || bad.Cursor != in {
			t.Errorf("ParseCursor(%q): %v; want a *BadCursorError", in, err)
		}
	}
}
