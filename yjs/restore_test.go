package yjs

import (
	"fmt"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
)

// The restore update is checked against JS yjs: the version and the current document are
// JS states of a random JS history (the version after its first part, the current one after
// all of it), RestoreUpdate computes the change in Go, and JS applies it to the current
// state: JS must then render exactly what JS renders for the version — every root, with
// text formatting (toDelta) and XML as its string. The same again for a restore of the
// restore (back to the state before it), which is how a restore is undone.
func TestRestoreUpdateAgreesWithJS(t *testing.T) {
	js := oracle.Start(t)
	n := historyCount(t, 200, 40)
	forSeeds(t, n, func(t *testing.T, seed uint64) {
		h, err := js.History(oracle.HistoryRequest{Seed: seed, Clients: 3, Steps: 120,
			Features: map[string]bool{oracle.FeatureOutOfOrder: false}})
		if err != nil {
			t.Fatal(err)
		}
		updates := h.UpdateBytes()
		cut := int(seed%uint64(len(updates)-1)) + 1
		version := jsState(t, js, updates[:cut], h.Roots)
		current := jsState(t, js, updates, h.Roots)
		checkRestore(t, js, h.Roots, current, version, "restore")
		restore, err := RestoreUpdate(current, version, "meta")
		if err != nil {
			t.Fatal(err)
		}
		if restore == nil {
			return // the history's second part changed nothing visible
		}
		after := jsState(t, js, [][]byte{current, restore}, h.Roots)
		checkRestore(t, js, h.Roots, after, current, "restore of the restore")
	})
}

// jsState is JS's encodeStateAsUpdate after applying updates to a fresh document.
func jsState(t *testing.T, js *oracle.Client, updates [][]byte, roots map[string]oracle.RootType) []byte {
	t.Helper()
	r, err := js.Apply(oracle.ApplyRequest{Updates: updates, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// checkRestore computes RestoreUpdate(current, version) and has JS check that applying it
// to current renders what version renders.
func checkRestore(t *testing.T, js *oracle.Client, roots map[string]oracle.RootType, current, version []byte, what string) {
	t.Helper()
	restore, err := RestoreUpdate(current, version)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, err := js.Apply(oracle.ApplyRequest{Updates: [][]byte{version}, Roots: roots, Deltas: true})
	if err != nil {
		t.Fatal(err)
	}
	updates := [][]byte{current}
	if restore != nil {
		updates = append(updates, restore)
	}
	got, err := js.Apply(oracle.ApplyRequest{Updates: updates, Roots: roots, Deltas: true})
	if err != nil {
		t.Fatalf("%s: JS refuses the restore update: %v", what, err)
	}
	if got.Pending {
		t.Fatalf("%s: JS holds structs of the restore update pending", what)
	}
	equalJSON(t, what+" (JSON)", got.JSON, want.JSON)
	equalJSON(t, what+" (text deltas)", got.Deltas, want.Deltas)
}

// A document already equal to the version needs no change; one that only gained content
// loses exactly that; content deleted since comes back, formatting included, and text that
// stayed keeps its identity (editors' positions in it survive).
func TestRestoreUpdateBasics(t *testing.T) {
	d := NewDoc()
	txt := d.GetText("t")
	must(t, txt.Insert(0, "hello world", nil))
	must(t, txt.Format(0, 5, Attrs{"bold": true}))
	m := d.GetMap("m")
	must(t, m.Set("a", 1.0))
	nested := NewArray("x", "y")
	must(t, m.Set("list", nested))
	version, err := EncodeStateAsUpdate(d, nil)
	must(t, err)

	same, err := RestoreUpdate(version, version)
	must(t, err)
	if same != nil {
		t.Fatalf("restoring a document to its own state made a change of %d bytes", len(same))
	}

	must(t, txt.Delete(0, 6))        // "world"
	must(t, txt.Insert(5, "!", nil)) // "world!"
	must(t, m.Set("a", 2.0))
	must(t, m.Delete("list"))
	must(t, m.Set("b", "new"))
	current, err := EncodeStateAsUpdate(d, nil)
	must(t, err)

	restore, err := RestoreUpdate(current, version)
	must(t, err)
	must(t, ApplyUpdate(d, restore, nil))
	if got := txt.String(); got != "hello world" {
		t.Fatalf("text after restore = %q", got)
	}
	delta := txt.ToDelta()
	if len(delta) != 2 || delta[0].Insert != "hello" || delta[0].Attributes["bold"] != true || delta[1].Insert != " world" {
		t.Fatalf("delta after restore = %#v", delta)
	}
	if got, _ := m.Get("a"); got != 1.0 {
		t.Fatalf("m.a after restore = %v", got)
	}
	if m.Has("b") {
		t.Fatal("m.b survived the restore")
	}
	l, ok := m.Get("list")
	if !ok {
		t.Fatal("m.list was not restored")
	}
	if got := l.(*Array).ToSlice(); len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Fatalf("m.list after restore = %v", got)
	}
	// "world" was never deleted: the restore keeps its items; it inserts "hello " only.
	var inserted []byte
	for it := (*Type)(txt).start; it != nil; it = it.right {
		if it.isString() && !it.deleted() && it.client() != d.ClientID() {
			inserted = append(inserted, it.str()...)
		}
	}
	if string(inserted) != "hello " {
		t.Fatalf("the restore inserted %q, want only what was deleted since the version (\"hello \")", inserted)
	}
	dd := NewDoc()
	must(t, ApplyUpdate(dd, current, nil))
	must(t, ApplyUpdate(dd, restore, nil))
	if got := dd.GetText("t").String(); got != "hello world" {
		t.Fatalf("another replica reads %q", got)
	}
}

// TestRestoreLargeJSHistories is TestRestoreUpdateAgreesWithJS at the sizes users reach: the
// large JS histories of TestLargeJSHistories (several MiB, thousands of structs per author),
// restored from their end to the state after a third of their updates, then back.
func TestRestoreLargeJSHistories(t *testing.T) {
	js := oracle.Start(t)
	for _, cfg := range largeConfigs(t) {
		t.Run(fmt.Sprintf("seed=%d", cfg.Seed), func(t *testing.T) {
			h := oracle.Large(t, cfg)
			a := h.Stream(t, "a")
			version := jsState(t, js, a[:len(a)/3], h.Roots)
			current := jsState(t, js, a, h.Roots)
			start := time.Now()
			restore, err := RestoreUpdate(current, version)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("state %d KiB, version %d KiB: restore update of %d KiB computed in %v",
				len(current)>>10, len(version)>>10, len(restore)>>10, time.Since(start).Round(time.Millisecond))
			checkRestore(t, js, h.Roots, current, version, "restore")
			after := jsState(t, js, [][]byte{current, restore}, h.Roots)
			checkRestore(t, js, h.Roots, after, current, "restore of the restore")
		})
	}
}
