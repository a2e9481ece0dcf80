package registry

import (
	"testing"

	"github.com/nomicore/nomicore/persistence"
)

func savePoint(t *testing.T, l *Lease) SavePoint {
	t.Helper()
	ch := make(chan SavePoint, 1)
	must(t, l.SavePointAsync(func(p SavePoint, err error) {
		must(t, err)
		ch <- p
	}))
	return <-ch
}

// TestSavePoint: the save point follows the last append, so that waiting for it covers a
// write that is applied but not durable yet; a write that changed nothing leaves it.
func TestSavePoint(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	before := savePoint(t, l)
	c := newClient(7)
	u := c.insertText(t, "body", 0, "saved?")
	res, err := l.WriteLocal(ctxT(t), u)
	must(t, err)
	if !res.Changed || res.Seq == 0 {
		t.Fatalf("write %+v", res)
	}
	p := savePoint(t, l)
	if p.Seq != res.Seq || p.Unsaved || p.Seq <= before.Seq {
		t.Fatalf("save point %+v after the write %+v (before it %+v)", p, res, before)
	}
	again, err := l.WriteLocal(ctxT(t), u) // nothing new
	must(t, err)
	if again.Changed {
		t.Fatalf("the same update again changed the document: %+v", again)
	}
	if q := savePoint(t, l); q != p {
		t.Fatalf("save point %+v after an update that changed nothing, want %+v", q, p)
	}
	must(t, l.WaitFlushed(ctxT(t), p.Seq))
}
