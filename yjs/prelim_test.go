package yjs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// A preliminary text (not yet in a document) refuses the changes a text in a document
// refuses, with the same errors, and records nothing for them.
func TestPrelimTextErrors(t *testing.T) {
	x := NewText("abc")
	for _, c := range []struct {
		name string
		call func() error
		want error
	}{
		{"insert past the end", func() error { return x.Insert(10, "x", nil) }, ErrIndexOutOfRange},
		{"insert at -1", func() error { return x.Insert(-1, "x", nil) }, ErrIndexOutOfRange},
		{"insert with an unsupported attribute", func() error { return x.Insert(1, "x", Attrs{"b": make(chan int)}) }, ErrUnsupportedValue},
		{"embed past the end", func() error { return x.InsertEmbed(4, map[string]any{"img": "a"}, nil) }, ErrIndexOutOfRange},
		{"embed an unsupported value", func() error { return x.InsertEmbed(1, make(chan int), nil) }, ErrUnsupportedValue},
		{"embed a type of a document", func() error { return x.InsertEmbed(1, NewDoc().GetMap("m"), nil) }, ErrAlreadyIntegrated},
		{"embed the text itself", func() error { return x.InsertEmbed(1, x, nil) }, ErrAlreadyIntegrated},
		{"delete past the end", func() error { return x.Delete(2, 2) }, ErrIndexOutOfRange},
		{"delete a negative length", func() error { return x.Delete(2, -1) }, ErrIndexOutOfRange},
		{"format past the end", func() error { return x.Format(0, 4, Attrs{"b": true}) }, ErrIndexOutOfRange},
		{"format with an unsupported attribute", func() error { return x.Format(0, 1, Attrs{"b": func() {}}) }, ErrUnsupportedValue},
	} {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// The length the checks use follows the changes that were accepted.
	must(t, x.Insert(3, "de", nil)) // abcde
	must(t, x.Delete(0, 1))         // bcde
	if err := x.Delete(3, 2); !errors.Is(err, ErrIndexOutOfRange) {
		t.Errorf("delete past the end after changes: %v", err)
	}
	must(t, x.Delete(3, 1)) // bcd
	must(t, x.Format(0, 3, Attrs{"b": true}))

	d := NewDoc(WithClientID(1))
	must(t, d.GetArray("a").Push(x))
	if got := x.String(); got != "bcd" {
		t.Fatalf("integrated text %q, want %q (refused changes must leave nothing)", got, "bcd")
	}
	if want := []Delta{{Insert: "bcd", Attributes: map[string]any{"b": true}}}; !reflect.DeepEqual(x.ToDelta(), want) {
		t.Fatalf("delta %v, want %v", x.ToDelta(), want)
	}
}

// Random changes made to a preliminary text and to a text in a document get the same
// answers, and once the preliminary text is placed in a document both hold the same content.
func TestPrelimTextMatchesIntegrated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	strs := []string{"", "a", "xyz", "é", "😀", "a😀b"}
	for run := range 300 {
		init := strs[r.IntN(len(strs))]
		pre := NewText(init)
		live := NewText(init)
		ld := NewDoc(WithClientID(2))
		must(t, ld.GetMap("m").Set("t", live))
		foreign := NewDoc().GetArray("x") // a type already in a document
		for step := range 25 {
			attrs := []Attrs{nil, {}, {"b": true}, {"b": nil}, {"i": 1.5, "b": true}, {"bad": make(chan int)}}[r.IntN(6)]
			// each text gets its own embed: a preliminary type can be placed only once
			embedOf := func(k int) any {
				switch k {
				case 0:
					return map[string]any{"img": "p.png"}
				case 1:
					return NewMap()
				case 2:
					return make(chan int)
				}
				return foreign
			}
			ek := r.IntN(4)
			n := live.Len()
			index, length := r.IntN(n+4)-1, r.IntN(n+4)-1
			s := strs[r.IntN(len(strs))]
			var op string
			var call func(x *Text) error
			switch r.IntN(4) {
			case 0:
				op = fmt.Sprintf("Insert(%d, %q, %v)", index, s, attrs)
				call = func(x *Text) error { return x.Insert(index, s, attrs) }
			case 1:
				op = fmt.Sprintf("InsertEmbed(%d, kind %d, %v)", index, ek, attrs)
				call = func(x *Text) error { return x.InsertEmbed(index, embedOf(ek), attrs) }
			case 2:
				op = fmt.Sprintf("Delete(%d, %d)", index, length)
				call = func(x *Text) error { return x.Delete(index, length) }
			default:
				op = fmt.Sprintf("Format(%d, %d, %v)", index, length, attrs)
				call = func(x *Text) error { return x.Format(index, length, attrs) }
			}
			pe, le := call(pre), call(live)
			if errClass(pe) != errClass(le) {
				t.Fatalf("run %d step %d %s on %q: preliminary text: %v; text in a document: %v", run, step, op, live.String(), pe, le)
			}
		}
		pd := NewDoc(WithClientID(1))
		must(t, pd.GetMap("m").Set("t", pre))
		if got, want := deltaJSON(pre), deltaJSON(live); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: preliminary text became %v, text in a document is %v", run, got, want)
		}
	}
}

// errClass names the sentinel error err wraps ("" for nil).
func errClass(err error) string {
	if err == nil {
		return ""
	}
	for _, e := range []error{ErrIndexOutOfRange, ErrUnsupportedValue, ErrAlreadyIntegrated, ErrNotIntegrated} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other: " + err.Error()
}

// deltaJSON is a text's delta with nested types rendered as JSON.
func deltaJSON(x *Text) []Delta {
	ds := x.ToDelta()
	for i := range ds {
		if t := typeOf(ds[i].Insert); t != nil {
			ds[i].Insert = t.toJSON()
		}
	}
	return ds
}

// Placing a preliminary type in a document checks everything it holds, nested types
// included, before anything changes: a value that cannot be placed is an error of the
// call, not content lost while the type is integrated.
func TestPrelimContentCheckedWhenPlaced(t *testing.T) {
	for _, c := range []struct {
		name string
		// build returns the value to push into the root array "a" of d
		build func(t *testing.T, d *Doc) any
		want  error
	}{
		{"array holding a type placed elsewhere since", func(t *testing.T, d *Doc) any {
			inner := NewMap()
			must(t, inner.Set("k", 1))
			outer := NewArray(inner)
			must(t, d.GetArray("other").Push(inner))
			return outer
		}, ErrAlreadyIntegrated},
		{"array holding an unsupported value", func(t *testing.T, d *Doc) any {
			return NewArray(1, struct{}{})
		}, ErrUnsupportedValue},
		{"map holding a text that embeds a type placed elsewhere since", func(t *testing.T, d *Doc) any {
			inner := NewMap()
			x := NewText("ab")
			must(t, x.InsertEmbed(1, inner, nil))
			m := NewMap()
			must(t, m.Set("t", x))
			must(t, d.GetArray("other").Push(inner))
			return m
		}, ErrAlreadyIntegrated},
		{"text embed and map value sharing one type", func(t *testing.T, d *Doc) any {
			inner := NewMap()
			x := NewText("ab")
			must(t, x.InsertEmbed(1, inner, nil))
			m := NewMap()
			must(t, m.Set("inner", inner))
			return NewArray(x, m)
		}, ErrAlreadyIntegrated},
		{"two elements sharing one child", func(t *testing.T, d *Doc) any {
			child := NewXmlText("x")
			a, b := NewXmlElement("p"), NewXmlElement("q")
			must(t, a.Insert(0, child))
			must(t, b.Insert(0, child))
			f := NewXmlFragment()
			if err := f.Push(a, b); !errors.Is(err, ErrAlreadyIntegrated) {
				t.Errorf("pushing both elements in one call: %v", err)
			}
			must(t, f.Push(a))
			must(t, f.Push(b)) // accepted: checked as a whole when f is placed
			return f
		}, ErrAlreadyIntegrated},
		{"element attribute holding a subdocument placed elsewhere since", func(t *testing.T, d *Doc) any {
			sub := NewSubdoc("sub-guid")
			e := NewXmlElement("p")
			must(t, e.SetAttribute("doc", sub))
			must(t, d.GetArray("other").Push(sub))
			return e
		}, ErrAlreadyIntegrated},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDoc(WithClientID(1))
			v := c.build(t, d)
			before := mustState(t, d)
			updates := 0
			d.OnUpdate(func([]byte, any) { updates++ })
			if err := d.GetArray("a").Push(v); !errors.Is(err, c.want) {
				t.Fatalf("push: got %v, want %v", err, c.want)
			}
			if after := mustState(t, d); updates != 0 || !bytes.Equal(before, after) {
				t.Fatalf("a refused push changed the document (%d updates)", updates)
			}
			if typeOf(v).doc != nil {
				t.Fatal("the refused type was integrated")
			}
		})
	}
}

// A change to a preliminary type that would place a type inside itself is refused when
// it is made; one that would place a type twice is refused when made in one call, and
// otherwise when the preliminary type is placed in a document.
func TestPrelimRefusesTypeTwice(t *testing.T) {
	m := NewMap()
	a := NewArray()
	if err := a.Push(m, m); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("pushing a type twice in one call: %v", err)
	}
	must(t, a.Push(m))
	if err := a.Insert(0, a); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("inserting a preliminary array into itself: %v", err)
	}
	if err := m.Set("self", m); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("setting a preliminary map as its own value: %v", err)
	}
	if err := m.Set("holder", a); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("setting a map to the array that holds it: %v", err)
	}
	x := NewText("ab")
	if err := x.InsertEmbed(0, x, nil); !errors.Is(err, ErrAlreadyIntegrated) {
		t.Errorf("embedding a preliminary text in itself: %v", err)
	}
	if a.Len() != 1 {
		t.Errorf("array length %d after refused changes", a.Len())
	}
	// The accepted content arrives whole.
	d := NewDoc(WithClientID(1))
	must(t, d.GetMap("root").Set("a", a))
	if got, ok := a.Get(0); !ok || got != m || a.Len() != 1 {
		t.Fatalf("array holds %v, want the map alone", a.ToSlice())
	}
	if m.Len() != 0 {
		t.Fatalf("map keys %v", m.Keys())
	}

	// Two calls that each place the same type: the placement is refused.
	twice := NewMap()
	b := NewArray()
	must(t, b.Push(twice))
	must(t, b.Push(twice))
	y := NewText("ab")
	must(t, y.InsertEmbed(1, twice, nil))
	must(t, y.InsertEmbed(0, twice, nil))
	for _, v := range []any{b, y} {
		if err := d.GetArray("list").Push(v); !errors.Is(err, ErrAlreadyIntegrated) {
			t.Errorf("placing a %T that holds a type twice: %v", v, err)
		}
	}
	if d.GetArray("list").Len() != 0 || twice.doc != nil {
		t.Fatal("a refused placement changed the document")
	}
}
