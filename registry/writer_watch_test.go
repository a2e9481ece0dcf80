package registry

import (
	"errors"
	"testing"
)

// A writer that relays its own updates (the editor endpoint) writes through
// WriteLocalExceptAsync: its watch does not get the update back, every other subscriber
// does; after an apply that released pending structs the writer's watch gets the
// transaction too, since it may carry structs the writer's audience lacks.
func TestWriteLocalExcept_SkipsTheWritersWatch(t *testing.T) {
	_, l, ss, cl := hubWithSessions(t, 1, SessionOptions{})
	mine, err := l.Watch(0, 0)
	must(t, err)
	defer mine.Close()
	other, err := l.Watch(0, 0)
	must(t, err)
	defer other.Close()

	write := func(u []byte) ApplyResult {
		t.Helper()
		ch := make(chan ApplyResult, 1)
		must(t, l.WriteLocalExceptAsync(mine, u, func(r ApplyResult, err error) {
			if err != nil {
				t.Errorf("write: %v", err)
			}
			ch <- r
		}))
		return <-ch
	}
	if r := write(cl.insertText(t, "text", 0, "a")); !r.Changed || r.Seq == 0 {
		t.Fatalf("write: %+v", r)
	}
	if p := mine.Poll(); len(p.Updates) != 0 {
		t.Fatalf("the writer's watch got %d updates back", len(p.Updates))
	}
	if p := other.Poll(); len(p.Updates) != 1 {
		t.Fatalf("another watch got %d updates, want 1", len(p.Updates))
	}
	if p := ss[0].Poll(); len(p.Updates) != 1 {
		t.Fatalf("a session got %d updates, want 1", len(p.Updates))
	}

	// Out of order: the second update waits as pending, the first releases it.
	u1 := cl.insertText(t, "text", 1, "b")
	u2 := cl.insertText(t, "text", 2, "c")
	write(u2)
	mine.Poll()
	write(u1)
	if p := mine.Poll(); len(p.Updates) != 1 {
		t.Fatalf("after releasing pending structs the writer's watch got %d updates, want 1", len(p.Updates))
	}
	doc, err := l.JSON(ctxT(t))
	must(t, err)
	if doc["text"] != "abc" {
		t.Fatalf("text %q", doc["text"])
	}
}

// IncludedAsync tells an update that brings nothing new from one that does, changing
// nothing; a malformed update is ErrApplyFailed.
func TestIncludedAsync(t *testing.T) {
	_, l, _, cl := hubWithSessions(t, 0, SessionOptions{})
	included := func(u []byte) (bool, error) {
		type res struct {
			ok  bool
			err error
		}
		ch := make(chan res, 1)
		must(t, l.IncludedAsync(u, func(ok bool, err error) { ch <- res{ok, err} }))
		r := <-ch
		return r.ok, r.err
	}
	u := cl.insertText(t, "text", 0, "hello")
	if ok, err := included(u); ok || err != nil {
		t.Fatalf("a new update: included=%v err=%v", ok, err)
	}
	if doc, _ := l.JSON(ctxT(t)); doc["text"] != nil && doc["text"] != "" {
		t.Fatalf("IncludedAsync changed the document: %v", doc)
	}
	_, err := l.WriteLocal(ctxT(t), u)
	must(t, err)
	if ok, err := included(u); !ok || err != nil {
		t.Fatalf("an applied update: included=%v err=%v", ok, err)
	}
	if _, err := included([]byte{0xff, 0xff}); !errors.Is(err, ErrApplyFailed) {
		t.Fatalf("malformed: %v", err)
	}
}
