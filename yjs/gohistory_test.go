package yjs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf16"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
	"github.com/nomicore/nomicore/lib0"
)

// Go-side random histories: several Go documents edit maps, arrays, texts (with formatting
// and embeds), XML and nested types concurrently and sync partially; JS yjs then applies
// every local update in a random order and must reach our JSON, state vector and state.

type goHistory struct {
	rng     *rand.Rand
	docs    []*Doc
	updates [][]byte
	guid    int
	seed    uint64
}

var (
	mapKeys     = []string{"a", "b", "c", "key", "ключ", "🔑", "0", "10", ""}
	bmpStrings  = []string{"", "x", "hello", "ünïcödé", "日本語", "tab\tnew\nline", `"q"\`, "<&>"}
	astral      = []string{"😀", "a😀b", "👩‍👩‍👧", "𝄞clef"}
	charsBMP    = []rune("abcxyz éüß日本ж ")
	charsAstral = []string{"😀", "🎉", "𝄞"}
	xmlNames    = []string{"p", "div", "span", "h1", "DIV", "li"}
	textFormats = []Attrs{{"bold": true}, {"italic": true}, {"color": "#ff0000"}, {"bold": nil},
		{"bold": true, "color": "green"}, {"link": map[string]any{"href": "https://example.com/ä"}}}
	xmlFormats = []Attrs{{"bold": true}, {"italic": true}, {"bold": nil}, {"a": map[string]any{"href": "x.html"}}}
	embeds     = []any{map[string]any{"image": "https://example.com/i.png"}, map[string]any{"formula": "e=mc^2"}}
)

func (g *goHistory) pick(n int) int { return g.rng.IntN(n) }

func (g *goHistory) str(n int) string {
	if g.pick(10) < 3 {
		if g.pick(3) == 0 {
			return astral[g.pick(len(astral))]
		}
		return bmpStrings[g.pick(len(bmpStrings))]
	}
	s := ""
	for i := 0; i < n; i++ {
		if g.pick(8) == 0 {
			s += charsAstral[g.pick(len(charsAstral))]
		} else {
			s += string(charsBMP[g.pick(len(charsBMP))])
		}
	}
	return s
}

func (g *goHistory) number() any {
	switch g.pick(7) {
	case 0:
		return g.pick(2001) - 1000
	case 1:
		return []float64{1<<31 - 1, 1 << 31, -(1 << 31), 1 << 32, 1<<53 - 1}[g.pick(5)]
	case 2:
		return float64(g.pick(64)-32) / 8
	case 3:
		return []float64{0.1, math.Pi, 1e300, -2.5e-8, 1 << 60}[g.pick(5)]
	case 4:
		return math.Copysign(0, -1)
	case 5:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[g.pick(3)]
	}
	return 0
}

func (g *goHistory) bytes() []byte {
	b := make([]byte, g.pick(8))
	for i := range b {
		b[i] = byte(g.pick(256))
	}
	return b
}

func (g *goHistory) anyValue(depth int) any {
	n := 9
	if depth < 3 {
		n = 11
	}
	switch g.pick(n) {
	case 0:
		return nil
	case 1:
		return g.pick(2) == 0
	case 2, 3:
		return g.number()
	case 4, 5:
		return g.str(g.pick(6))
	case 6:
		return lib0.Undefined{}
	case 7:
		return lib0.BigInt(int64(g.rng.Uint64()))
	case 8:
		return g.bytes()
	case 9:
		arr := make([]any, g.pick(4))
		for i := range arr {
			arr[i] = g.anyValue(depth + 1)
		}
		return arr
	default:
		o := lib0.Object{}
		for i := g.pick(4); i > 0; i-- {
			o = append(o, lib0.Field{Key: mapKeys[g.pick(len(mapKeys))], Value: g.anyValue(depth + 1)})
		}
		return o
	}
}

func (g *goHistory) xmlElement(depth int) *XmlElement {
	el := NewXmlElement(xmlNames[g.pick(len(xmlNames))])
	if g.pick(2) == 0 {
		_ = el.SetAttribute([]string{"id", "class", "title"}[g.pick(3)], g.str(3))
	}
	if depth < 3 && g.pick(3) == 0 {
		_ = el.Insert(0, NewXmlText(g.str(1+g.pick(4))))
	}
	return el
}

func (g *goHistory) value(depth int) any {
	switch r := g.pick(20); {
	case r < 2:
		return g.bytes()
	case r < 5 && depth < 3:
		switch g.pick(5) {
		case 0:
			m := NewMap()
			if g.pick(2) == 0 {
				_ = m.Set(mapKeys[g.pick(len(mapKeys))], g.anyValue(0))
			}
			return m
		case 1:
			return NewArray(g.anyValue(0), g.anyValue(0))
		case 2:
			return NewText(g.str(g.pick(5)))
		case 3:
			return g.xmlElement(depth)
		default:
			return NewXmlText(g.str(g.pick(5)))
		}
	case r < 6:
		g.guid++
		opts := []SubdocOption{}
		if g.pick(3) == 0 {
			opts = append(opts, SubdocMeta(lib0.Object{{Key: "title", Value: g.str(3)}}))
		}
		if g.pick(3) == 0 {
			opts = append(opts, SubdocAutoLoad(true))
		}
		if g.pick(5) == 0 {
			opts = append(opts, SubdocGC(false))
		}
		return NewSubdoc(fmt.Sprintf("sub-%d-%d", g.seed, g.guid), opts...)
	}
	return g.anyValue(0)
}

// types lists the live types of d: the roots and the nested types under them.
func types(d *Doc) []*Type {
	var out []*Type
	var walk func(t *Type)
	walk = func(t *Type) {
		out = append(out, t)
		switch t.kind {
		case KindMap:
			for _, k := range t.mapKeys() {
				v, _ := t.mapGet(k)
				if c := typeOf(v); c != nil {
					walk(c)
				}
			}
		case KindArray, KindXmlFragment, KindXmlElement:
			for _, v := range t.listAll() {
				if c := typeOf(v); c != nil {
					walk(c)
				}
			}
		}
	}
	for _, n := range []string{"map", "array", "text", "xml"} {
		walk(d.roots[n])
	}
	return out
}

// textUnits is the text as UTF-16 units with embeds as U+FFFC.
func textUnits(t *Type) []uint16 {
	var u []uint16
	for _, d := range t.toDelta() {
		if s, ok := d.Insert.(string); ok {
			u = append(u, utf16.Encode([]rune(s))...)
		} else {
			u = append(u, 0xfffc)
		}
	}
	return u
}

func (g *goHistory) textPos(u []uint16, hi int) int {
	p := g.pick(hi + 1)
	for p > 0 && p < len(u) && utf16.IsSurrogate(rune(u[p-1])) && u[p-1] < 0xdc00 {
		p--
	}
	return p
}

func (g *goHistory) textRange(u []uint16) (int, int) {
	start := g.textPos(u, len(u)-1)
	end := min(len(u), start+1+g.pick(7))
	for end < len(u) && utf16.IsSurrogate(rune(u[end-1])) && u[end-1] < 0xdc00 {
		end++
	}
	return start, end - start
}

func (g *goHistory) op(t *Type) error {
	switch t.kind {
	case KindMap:
		if g.pick(5) == 0 {
			keys := t.mapKeys()
			k := mapKeys[g.pick(len(mapKeys))]
			if len(keys) > 0 && g.pick(5) != 0 {
				k = keys[g.pick(len(keys))]
			}
			return (*Map)(t).Delete(k)
		}
		return (*Map)(t).Set(mapKeys[g.pick(len(mapKeys))], g.value(depthOf(t)))
	case KindArray:
		a := (*Array)(t)
		r := g.pick(20)
		if a.Len() > 0 && r < 7 {
			i := g.pick(a.Len())
			return a.Delete(i, min(a.Len()-i, 1+g.pick(4)))
		}
		vals := make([]any, 1+g.pick(3))
		for i := range vals {
			vals[i] = g.value(depthOf(t))
		}
		switch {
		case r < 9:
			return a.Push(vals...)
		case r < 10:
			return a.Insert(0, vals...)
		}
		return a.Insert(g.pick(a.Len()+1), vals...)
	case KindText, KindXmlText:
		x := (*Text)(t)
		u := textUnits(t)
		formats := textFormats
		if t.kind == KindXmlText {
			formats = xmlFormats
		}
		r := g.pick(20)
		if len(u) > 0 && r < 5 {
			i, n := g.textRange(u)
			return x.Delete(i, n)
		}
		if len(u) > 0 && r < 9 {
			i, n := g.textRange(u)
			return x.Format(i, n, formats[g.pick(len(formats))])
		}
		i := g.textPos(u, len(u))
		if r < 11 && t.kind == KindText {
			var a Attrs
			if g.pick(3) == 0 {
				a = formats[g.pick(len(formats))]
			}
			return x.InsertEmbed(i, embeds[g.pick(len(embeds))], a)
		}
		s := g.str(1 + g.pick(7))
		if s == "" {
			s = "z"
		}
		if g.pick(3) == 0 {
			return x.Insert(i, s, formats[g.pick(len(formats))])
		}
		return x.Insert(i, s, nil)
	case KindXmlFragment, KindXmlElement:
		r := g.pick(20)
		if t.length > 0 && r < 6 {
			i := g.pick(t.length)
			return t.seqDelete(i, min(t.length-i, 1+g.pick(3)))
		}
		if r < 10 && t.kind == KindXmlElement {
			e := (*XmlElement)(t)
			k := []string{"id", "class", "data-x", "title"}[g.pick(4)]
			if g.pick(4) == 0 {
				return e.RemoveAttribute(k)
			}
			return e.SetAttribute(k, g.str(3))
		}
		nodes := make([]any, 1+g.pick(2))
		for i := range nodes {
			if g.pick(2) == 0 && depthOf(t) < 4 {
				nodes[i] = g.xmlElement(depthOf(t) + 1)
			} else {
				nodes[i] = NewXmlText(g.str(1 + g.pick(5)))
			}
		}
		return t.seqInsert(g.pick(t.length+1), nodes)
	}
	return nil
}

func depthOf(t *Type) int {
	d := 0
	for t.item != nil {
		d++
		t = t.item.parent
	}
	return d
}

func (g *goHistory) sync(t *testing.T) {
	a := g.docs[g.pick(len(g.docs))]
	if g.pick(2) == 0 {
		// single updates out of causal order
		for _, i := range g.rng.Perm(len(g.updates)) {
			if g.pick(2) == 0 {
				if err := ApplyUpdate(a, g.updates[i], "remote"); err != nil {
					t.Fatal(err)
				}
			}
		}
		return
	}
	b := g.docs[g.pick(len(g.docs))]
	u, err := EncodeStateAsUpdate(b, a.EncodeStateVector())
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyUpdate(a, u, "remote"); err != nil {
		t.Fatal(err)
	}
}

var historyRoots = map[string]string{"map": "map", "array": "array", "text": "text", "xml": "xml"}

func TestDifferentialGoHistories(t *testing.T) {
	js := oracle.Start(t)
	forSeeds(t, historyCount(t, 500, 60), func(t *testing.T, seed uint64) {
		g := &goHistory{rng: rand.New(rand.NewPCG(seed, 0x90)), seed: seed}
		gc := g.pick(4) != 0
		for i := 1 + g.pick(4); i > 0; i-- {
			d := NewDoc(WithClientID(g.rng.Uint32()), WithGC(gc), WithRandom(zeroReader{}))
			defineRoots(t, d, historyRoots)
			recordLocalUpdates(d, &g.updates)
			g.docs = append(g.docs, d)
		}
		steps := 5 + g.pick(60)
		for s := 0; s < steps; s++ {
			d := g.docs[g.pick(len(g.docs))]
			var err error
			d.Transact(nil, func(*Transaction) {
				for k := 1 + g.pick(3); k > 0 && err == nil; k-- {
					ts := types(d)
					err = g.op(ts[g.pick(len(ts))])
				}
			})
			if err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			if len(g.docs) > 1 && g.pick(3) == 0 {
				g.sync(t)
			}
		}
		// every client converges after a full sync
		ref := newRootedDoc(t, gc, historyRoots)
		applyAll(t, ref, g.updates)
		want := docJSON(t, ref)
		full, err := EncodeStateAsUpdate(ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range g.docs {
			applyAll(t, d, [][]byte{full})
			equalJSON(t, "client after sync", docJSON(t, d), want)
			equalBytes(t, "client state vector", d.EncodeStateVector(), ref.EncodeStateVector())
		}
		// JS applies our updates in a random order; we apply them in the same order
		order := make([][]byte, len(g.updates))
		for i, p := range g.rng.Perm(len(g.updates)) {
			order[i] = g.updates[p]
		}
		ours := newRootedDoc(t, gc, historyRoots)
		applyAll(t, ours, order)
		res, err := js.Apply(oracle.ApplyRequest{Updates: order, Roots: map[string]oracle.RootType{"map": oracle.Map, "array": oracle.Array, "text": oracle.Text, "xml": oracle.XML}, NoGC: !gc})
		if err != nil {
			t.Fatal(err)
		}
		equalJSON(t, "JS applying our updates", res.JSON, docJSON(t, ours))
		// (No check against the creation-order JSON: formatting cleanups after remote
		// transactions depend on the delivery order, in JS as here.)
		equalBytes(t, "state vector", ours.EncodeStateVector(), res.StateVector)
		state, err := EncodeStateAsUpdate(ours, nil)
		if err != nil {
			t.Fatal(err)
		}
		equalBytes(t, "encodeStateAsUpdate", state, res.State)
	})
}

// zeroReader is a deterministic random source for client-id collisions in tests.
type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 7
	}
	return len(b), nil
}
