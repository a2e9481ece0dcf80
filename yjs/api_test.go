package yjs

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/nomicore/nomicore/lib0"
)

func TestTransactGroupsChangesIntoOneUpdate(t *testing.T) {
	d := NewDoc(WithClientID(1))
	var origins []any
	var updates [][]byte
	off := d.OnUpdate(func(u []byte, origin any) {
		origins = append(origins, origin)
		updates = append(updates, u)
	})
	d.Transact("mine", func(tx *Transaction) {
		if !tx.Local() || tx.Origin() != "mine" {
			t.Errorf("transaction local=%v origin=%v", tx.Local(), tx.Origin())
		}
		must(t, d.GetMap("m").Set("a", 1))
		d.Transact("ignored: joins the open transaction", func(*Transaction) {
			must(t, d.GetText("t").Insert(0, "xy", nil))
		})
	})
	if len(updates) != 1 || origins[0] != "mine" {
		t.Fatalf("%d updates, origins %v", len(updates), origins)
	}
	// the update carries both changes
	r := NewDoc()
	must(t, ApplyUpdate(r, updates[0], nil))
	if v, _ := r.GetMap("m").Get("a"); v != 1.0 || r.GetText("t").String() != "xy" {
		t.Fatalf("replica: %v %q", v, r.GetText("t").String())
	}
	// a transaction that changes nothing emits nothing; unsubscribed handlers get nothing
	d.Transact(nil, func(*Transaction) {})
	must(t, d.GetMap("m").Delete("missing"))
	off()
	must(t, d.GetMap("m").Set("b", 2))
	if len(updates) != 1 {
		t.Fatalf("%d updates", len(updates))
	}
	// remote origins are passed through
	var got any
	d.OnUpdate(func(_ []byte, origin any) { got = origin })
	other := NewDoc(WithClientID(2))
	must(t, other.GetArray("a").Push(1))
	must(t, ApplyUpdate(d, mustState(t, other), "peer-7"))
	if got != "peer-7" {
		t.Fatalf("origin %v", got)
	}
}

func TestAPIErrors(t *testing.T) {
	d := NewDoc(WithClientID(1))
	a := d.GetArray("a")
	if err := a.Insert(1, "x"); !errors.Is(err, ErrIndexOutOfRange) {
		t.Errorf("insert past end: %v", err)
	}
	must(t, a.Push(1, 2))
	if err := a.Delete(1, 2); !errors.Is(err, ErrIndexOutOfRange) {
		t.Errorf("delete past end: %v", err)
	}
	if err := d.GetText("t").Insert(-1, "x", nil); !errors.Is(err, ErrIndexOutOfRange) {
		t.Errorf("negative index: %v", err)
	}
	if err := d.GetMap("m").Set("k", struct{}{}); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("struct value: %v", err)
	}
	m := NewMap()
	must(t, a.Push(m))
	if err := a.Push(m); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("inserting a type twice: %v", err)
	}
	if _, err := d.Get("a", KindText); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("kind mismatch: %v", err)
	}
	if err := (&Map{}).Set("k", 1); !errors.Is(err, ErrNotIntegrated) {
		t.Errorf("detached type: %v", err)
	}
	if a.Len() != 3 {
		t.Errorf("len %d", a.Len())
	}
}

func TestClientIDCollisionTakesNewID(t *testing.T) {
	d := NewDoc(WithClientID(5), WithRandom(zeroReader{}))
	other := NewDoc(WithClientID(5))
	must(t, other.GetText("t").Insert(0, "x", nil))
	must(t, ApplyUpdate(d, mustState(t, other), nil))
	if d.ClientID() == 5 {
		t.Fatal("the client id was not changed after a remote write under it")
	}
	must(t, d.GetText("t").Insert(1, "y", nil))
	if got := d.GetText("t").String(); got != "xy" {
		t.Fatal(got)
	}
}

func TestGCSwitch(t *testing.T) {
	for _, gc := range []bool{true, false} {
		d := NewDoc(WithClientID(1), WithGC(gc))
		x := d.GetText("t")
		must(t, x.Insert(0, "keep-DELETED-keep", nil))
		must(t, x.Delete(5, 8))
		st := mustState(t, d)
		if kept := strings.Contains(string(st), "DELETED"); kept == gc {
			t.Errorf("gc %v: deleted text kept in the state: %v", gc, kept)
		}
		r := NewDoc()
		must(t, ApplyUpdate(r, st, nil))
		if r.GetText("t").String() != "keep-keep" {
			t.Errorf("gc %v: %q", gc, r.GetText("t").String())
		}
	}
}

// TestSearchMarkersAgreeWithModel: long random local editing (the marker-based index
// lookups) against a plain string and slice.
func TestSearchMarkersAgreeWithModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	d := NewDoc(WithClientID(1))
	x := d.GetText("t")
	a := d.GetArray("a")
	var model []uint16
	var arr []any
	runes := []rune("ab日😀")
	for i := 0; i < 20000; i++ {
		switch r := rng.IntN(10); {
		case r < 5:
			p := rng.IntN(len(model) + 1)
			for p > 0 && p < len(model) && utf16.IsSurrogate(rune(model[p-1])) && model[p-1] < 0xdc00 {
				p--
			}
			s := string(runes[rng.IntN(len(runes))]) + string(runes[rng.IntN(2)])
			must(t, x.Insert(p, s, nil))
			model = slices.Insert(model, p, utf16.Encode([]rune(s))...)
		case r < 7 && len(model) > 0:
			p := rng.IntN(len(model))
			for p > 0 && utf16.IsSurrogate(rune(model[p-1])) && model[p-1] < 0xdc00 {
				p--
			}
			n := min(len(model)-p, 1+rng.IntN(4))
			for p+n < len(model) && utf16.IsSurrogate(rune(model[p+n-1])) && model[p+n-1] < 0xdc00 {
				n++
			}
			must(t, x.Delete(p, n))
			model = slices.Delete(model, p, p+n)
		case r < 8:
			must(t, a.Push(float64(i)))
			arr = append(arr, float64(i))
		case r < 9:
			p := rng.IntN(len(arr) + 1)
			must(t, a.Insert(p, float64(i), float64(-i)))
			arr = slices.Insert(arr, p, any(float64(i)), any(float64(-i)))
		case len(arr) > 0:
			p := rng.IntN(len(arr))
			n := min(len(arr)-p, 1+rng.IntN(3))
			must(t, a.Delete(p, n))
			arr = slices.Delete(arr, p, p+n)
		}
		if i%500 == 0 || i == 19999 {
			if got := x.String(); got != string(utf16.Decode(model)) || x.Len() != len(model) {
				t.Fatalf("op %d: text differs (len %d vs %d)", i, x.Len(), len(model))
			}
			if !slices.Equal(a.ToSlice(), arr) {
				t.Fatalf("op %d: array differs", i)
			}
			for k := 0; k < 20 && len(arr) > 0; k++ {
				p := rng.IntN(len(arr))
				if v, _ := a.Get(p); v != arr[p] {
					t.Fatalf("op %d: Get(%d) = %v, want %v", i, p, v, arr[p])
				}
			}
		}
	}
	// a replica reading the state agrees
	r := NewDoc()
	must(t, ApplyUpdate(r, mustState(t, d), nil))
	if r.GetText("t").String() != x.String() || !slices.Equal(r.GetArray("a").ToSlice(), arr) {
		t.Fatal("replica differs")
	}
}

func TestUntypedRootsAreInferred(t *testing.T) {
	src := NewDoc(WithClientID(1))
	must(t, src.GetMap("m").Set("k", "v"))
	must(t, src.GetText("t").Insert(0, "txt", nil))
	must(t, src.GetArray("a").Push(1, "two"))
	d := NewDoc()
	must(t, ApplyUpdate(d, mustState(t, src), nil))
	if names := d.RootNames(); !slices.Equal(names, []string{"a", "m", "t"}) {
		t.Fatalf("roots %v", names)
	}
	for _, name := range d.RootNames() {
		if k, _ := d.Get(name, KindUnknown); k.Kind() != KindUnknown {
			t.Fatalf("root %s typed by a remote update: %v", name, k.Kind())
		}
	}
	assertJSON(t, d, []byte(`{"a":[1,"two"],"m":{"k":"v"},"t":"txt"}`))
}

func TestSubdocumentsRoundTrip(t *testing.T) {
	d := NewDoc(WithClientID(1))
	sub := NewSubdoc("sub-guid", SubdocAutoLoad(true), SubdocGC(false), SubdocMeta(lib0.Object{{Key: "title", Value: "x"}}))
	must(t, d.GetMap("m").Set("doc", sub))
	if len(d.Subdocs()) != 1 {
		t.Fatal("subdoc not registered")
	}
	r := NewDoc()
	must(t, ApplyUpdate(r, mustState(t, d), nil))
	v, _ := r.GetMap("m").Get("doc")
	rs := v.(*Doc)
	if rs.GUID() != "sub-guid" || rs.GC() || !rs.AutoLoad() || !rs.ShouldLoad() {
		t.Fatalf("subdoc options: guid %q gc %v autoLoad %v shouldLoad %v", rs.GUID(), rs.GC(), rs.AutoLoad(), rs.ShouldLoad())
	}
	if m, _ := rs.Meta().(lib0.Object).Get("title"); m != "x" {
		t.Fatalf("meta %v", rs.Meta())
	}
	assertJSON(t, r, []byte(`{"m":{"doc":{"$doc":"sub-guid"}}}`))
	if st1, st2 := mustState(t, d), mustState(t, r); string(st1) != string(st2) {
		t.Fatal("the replica encodes the subdocument differently")
	}
	must(t, r.GetMap("m").Delete("doc"))
	if len(r.Subdocs()) != 0 {
		t.Fatal("deleted subdoc still listed")
	}
}

// TestDeepNesting: deleting, collecting, encoding and rendering a chain of nested types far
// deeper than any stack-based walk could follow.
func TestDeepNesting(t *testing.T) {
	const depth = 100_000
	d := NewDoc(WithClientID(1))
	m := d.GetMap("root")
	d.Transact(nil, func(*Transaction) {
		for i := 0; i < depth; i++ {
			child := NewMap()
			must(t, m.Set("c", child))
			v, _ := m.Get("c")
			m = v.(*Map)
		}
	})
	r := NewDoc()
	must(t, ApplyUpdate(r, mustState(t, d), nil))
	b := docJSON(t, r)
	if !strings.Contains(string(b), `"$truncated":true`) {
		t.Fatal("deep JSON not truncated")
	}
	must(t, d.GetMap("root").Delete("c"))
	if n := len(mustState(t, d)); n > 200 {
		t.Fatalf("the deleted chain was not collected: state of %d bytes", n)
	}
	assertJSON(t, d, []byte(`{"root":{}}`))
}

// TestUpdateEventUnlocked: a transaction that integrates structs waiting as pending says so,
// so the replication layer does not suppress its update as an echo of the origin.
func TestUpdateEventUnlocked(t *testing.T) {
	a := NewDoc(WithClientID(1))
	var ups [][]byte
	a.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
	must(t, a.GetText("t").Insert(0, "one", nil))
	must(t, a.GetText("t").Insert(3, "two", nil))
	must(t, a.GetText("t").Delete(0, 1))

	hub := NewDoc(WithClientID(9))
	var events []UpdateEvent
	hub.OnUpdateEvent(func(ev UpdateEvent) { events = append(events, ev) })
	must(t, ApplyUpdate(hub, ups[1], "peer-b")) // depends on ups[0]: waits
	must(t, ApplyUpdate(hub, ups[2], "peer-b")) // deletes what is not there yet: waits
	if len(events) != 0 || !hub.HasPending() || hub.PendingBytes() < len(ups[1]) {
		t.Fatalf("events %d, pending %v (%d bytes)", len(events), hub.HasPending(), hub.PendingBytes())
	}
	must(t, ApplyUpdate(hub, ups[0], "peer-c"))
	if len(events) != 1 || !events[0].Unlocked || events[0].Local || events[0].Origin != "peer-c" {
		t.Fatalf("events %+v", events)
	}
	if hub.HasPending() || hub.PendingBytes() != 0 || hub.GetText("t").String() != "netwo" {
		t.Fatalf("pending %v, text %q", hub.HasPending(), hub.GetText("t").String())
	}
	// the event's update carries everything: a fresh document reaches the same text
	r := NewDoc()
	must(t, ApplyUpdate(r, events[0].Update, nil))
	if r.GetText("t").String() != "netwo" {
		t.Fatalf("replica %q", r.GetText("t").String())
	}
	must(t, hub.GetText("t").Insert(0, "x", nil))
	if ev := events[len(events)-1]; ev.Unlocked || !ev.Local {
		t.Fatalf("local event %+v", ev)
	}
	other := NewDoc(WithClientID(5))
	must(t, other.GetArray("a").Push(1))
	must(t, ApplyUpdate(hub, mustState(t, other), "peer-d"))
	if ev := events[len(events)-1]; ev.Unlocked || ev.Local {
		t.Fatalf("plain remote event %+v", ev)
	}
}

func TestPanickingHandlerIsIgnored(t *testing.T) {
	d := NewDoc(WithClientID(1))
	var got int
	d.OnUpdate(func([]byte, any) { panic("handler bug") })
	d.OnUpdate(func([]byte, any) { got++ })
	must(t, d.GetText("t").Insert(0, "a", nil))
	must(t, ApplyUpdate(d, mustState(t, NewDoc()), nil))
	other := NewDoc(WithClientID(2))
	must(t, other.GetText("t").Insert(0, "b", nil))
	must(t, ApplyUpdate(d, mustState(t, other), nil))
	if got != 2 || len(d.GetText("t").String()) != 2 {
		t.Fatalf("handler calls %d, text %q", got, d.GetText("t").String())
	}
}

// TestPanicInTransactStillEmits: the changes made before a panic in the callback are
// cleaned up and sent, as JS does when the callback throws.
func TestPanicInTransactStillEmits(t *testing.T) {
	d := NewDoc(WithClientID(1))
	var updates [][]byte
	d.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		d.Transact(nil, func(*Transaction) {
			must(t, d.GetText("t").Insert(0, "kept", nil))
			panic("application bug")
		})
	}()
	if len(updates) != 1 {
		t.Fatalf("%d updates", len(updates))
	}
	must(t, d.GetText("t").Insert(4, "!", nil))
	r := NewDoc()
	for _, u := range updates {
		must(t, ApplyUpdate(r, u, nil))
	}
	if r.GetText("t").String() != "kept!" {
		t.Fatalf("replica %q", r.GetText("t").String())
	}
}
