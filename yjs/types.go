package yjs

import (
	"slices"
	"sort"
)

// Kind is the concrete type of a shared type.
type Kind uint8

// Kinds of shared types. A root obtained only through remote updates has KindUnknown until
// the application asks for it as a concrete kind (as JS AbstractType roots do).
const (
	KindUnknown Kind = iota
	KindArray
	KindMap
	KindText
	KindXmlElement
	KindXmlFragment
	KindXmlHook
	KindXmlText
)

var kindNames = [...]string{"unknown", "array", "map", "text", "xmlElement", "xmlFragment", "xmlHook", "xmlText"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + string(rune('0'+k)) + ")"
}

// typeRef is the number that encodes the kind in a ContentType (JS YArrayRefID …).
func (k Kind) typeRef() uint8 {
	switch k {
	case KindArray:
		return 0
	case KindMap:
		return 1
	case KindText:
		return 2
	case KindXmlElement:
		return 3
	case KindXmlFragment:
		return 4
	case KindXmlHook:
		return 5
	case KindXmlText:
		return 6
	}
	panic("yjs: kind without a type ref")
}

// kindOfRef maps a type ref to its kind.
func kindOfRef(ref uint64) (Kind, bool) {
	switch ref {
	case 0:
		return KindArray, true
	case 1:
		return KindMap, true
	case 2:
		return KindText, true
	case 3:
		return KindXmlElement, true
	case 4:
		return KindXmlFragment, true
	case 5:
		return KindXmlHook, true
	case 6:
		return KindXmlText, true
	}
	return 0, false
}

func (k Kind) isText() bool { return k == KindText || k == KindXmlText }

// Type is a shared type: a root of a document or a nested value. Its items form a sequence
// (start, linked by right) and a map (entries: the newest item of each key, whose left
// links lead to the key's older values). Map, Array, Text, XmlFragment, XmlElement, XmlText
// and XmlHook are views of a Type with the methods that fit its kind.
type Type struct {
	doc      *Doc
	item     *item  // the item holding this type; nil for a root
	rootName string // the name of a root
	kind     Kind
	nodeName string // XmlElement node name / XmlHook hook name

	start   *item
	entries map[string]*item
	length  int // visible countable units of the sequence

	hasFormatting bool     // a ContentFormat was integrated (JS _hasFormatting)
	changed       bool     // listed in the open transaction's changed types
	markers       []marker // search markers of the sequence (see markers.go)
	markerTick    uint64   // orders marker use

	prelim *prelim // content given before integration
}

// prelim holds the content of a type created by the application before it is inserted
// into a document. Every change recorded here was checked when it was made, and the whole
// content is checked again (check) when the type is placed in a document, so that
// replaying it on integration cannot fail.
type prelim struct {
	keys    []string       // map entries / XML attributes, in insertion order
	values  map[string]any // the value of each key
	list    []any          // sequence content (Array, XmlFragment, XmlElement)
	text    []textOp       // changes of a Text or XmlText, in order
	textLen int            // the length of the text after those changes
}

func newType(kind Kind) *Type { return &Type{kind: kind, entries: make(map[string]*item)} }

func newPrelimType(kind Kind) *Type {
	t := newType(kind)
	t.prelim = &prelim{values: map[string]any{}}
	return t
}

// Kind returns the concrete type (KindUnknown for an untyped root).
func (t *Type) Kind() Kind { return t.kind }

// Doc returns the document of the type (nil while preliminary).
func (t *Type) Doc() *Doc { return t.doc }

// Parent returns the type holding this one (nil for a root).
func (t *Type) Parent() *Type {
	if t.item == nil {
		return nil
	}
	return t.item.parent
}

// Deleted reports whether the type was deleted from its document.
func (t *Type) Deleted() bool { return t.item != nil && t.item.deleted() }

// value returns the typed view of t, as values in the document are handed out.
func (t *Type) value() any {
	switch t.kind {
	case KindArray:
		return (*Array)(t)
	case KindMap:
		return (*Map)(t)
	case KindText:
		return (*Text)(t)
	case KindXmlElement:
		return (*XmlElement)(t)
	case KindXmlFragment:
		return (*XmlFragment)(t)
	case KindXmlHook:
		return (*XmlHook)(t)
	case KindXmlText:
		return (*XmlText)(t)
	}
	return t
}

// typeOf returns the Type behind a typed view, or nil.
func typeOf(v any) *Type {
	switch x := v.(type) {
	case *Type:
		return x
	case *Array:
		return (*Type)(x)
	case *Map:
		return (*Type)(x)
	case *Text:
		return (*Type)(x)
	case *XmlElement:
		return (*Type)(x)
	case *XmlFragment:
		return (*Type)(x)
	case *XmlHook:
		return (*Type)(x)
	case *XmlText:
		return (*Type)(x)
	}
	return nil
}

// Get returns the root type name as kind. A root seen only in remote updates has
// KindUnknown; asking for it as a concrete kind types it (JS Doc.get). Asking for a root
// that has another concrete kind is ErrKindMismatch. KindUnknown returns the root as it is.
func (d *Doc) Get(name string, kind Kind) (*Type, error) {
	t := d.roots[name]
	if t == nil {
		t = newType(kind)
		t.doc, t.rootName = d, name
		d.roots[name] = t
		return t, nil
	}
	if kind == KindUnknown || t.kind == kind {
		return t, nil
	}
	if t.kind != KindUnknown {
		return nil, ErrKindMismatch
	}
	// JS replaces the AbstractType by a fresh typed object that takes over the items; its
	// formatting flag and search markers start anew.
	t.kind = kind
	t.hasFormatting = false
	t.clearMarkers()
	return t, nil
}

func (d *Doc) mustGet(name string, kind Kind) *Type {
	t, err := d.Get(name, kind)
	if err != nil {
		panic("yjs: root " + name + " is a " + d.roots[name].kind.String() + ", not a " + kind.String())
	}
	return t
}

// GetMap returns the root map name. It panics if the root has another concrete kind (use
// Get to handle that as an error).
func (d *Doc) GetMap(name string) *Map { return (*Map)(d.mustGet(name, KindMap)) }

// GetArray returns the root array name (see GetMap about kinds).
func (d *Doc) GetArray(name string) *Array { return (*Array)(d.mustGet(name, KindArray)) }

// GetText returns the root text name (see GetMap about kinds).
func (d *Doc) GetText(name string) *Text { return (*Text)(d.mustGet(name, KindText)) }

// GetXmlFragment returns the root XML fragment name (see GetMap about kinds).
func (d *Doc) GetXmlFragment(name string) *XmlFragment {
	return (*XmlFragment)(d.mustGet(name, KindXmlFragment))
}

// RootNames returns the names of the roots, sorted.
func (d *Doc) RootNames() []string {
	names := make([]string, 0, len(d.roots))
	for n := range d.roots {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// root returns the root name, creating it untyped (remote updates do this).
func (d *Doc) root(name string) *Type {
	t, _ := d.Get(name, KindUnknown)
	return t
}

// integrate makes a (preliminary) type part of the document at item and replays the
// content given before. That content was checked (prelim.check) before the change that
// placed the type began, so a failure here is a broken invariant.
func (t *Type) integrate(tx *Transaction, it *item) {
	t.doc = tx.doc
	t.item = it
	p := t.prelim
	t.prelim = nil
	if p == nil {
		return
	}
	switch t.kind {
	case KindMap, KindXmlHook:
		for _, k := range p.keys {
			mustReplay(t.mapSet(tx, k, p.values[k]))
		}
	case KindArray, KindXmlFragment, KindXmlElement:
		if len(p.list) > 0 {
			mustReplay(t.listInsert(tx, 0, p.list))
		}
		for _, k := range p.keys {
			mustReplay(t.mapSet(tx, k, p.values[k]))
		}
	case KindText, KindXmlText:
		for i := range p.text {
			mustReplay(p.text[i].apply(tx, t))
		}
	}
}

// mustReplay panics if replaying checked preliminary content failed.
func mustReplay(err error) {
	if err != nil {
		panic("yjs: replaying the checked content of a preliminary type: " + err.Error())
	}
}

// check returns the error that replaying p would meet: a value with no Yjs
// representation, an index out of range, or a type or subdocument that is already in a
// document or held twice. seen holds the types and subdocuments placed by the same change
// so far (contentOf).
func (p *prelim) check(seen map[any]bool) error {
	for _, v := range p.list {
		if _, _, err := contentOf(v, seen); err != nil {
			return err
		}
	}
	for _, k := range p.keys {
		if _, _, err := contentOf(p.values[k], seen); err != nil {
			return err
		}
	}
	length := 0
	for i := range p.text {
		n, err := p.text[i].check(length, seen)
		if err != nil {
			return err
		}
		length = n
	}
	return nil
}

func (t *Type) sortedKeys() []string {
	keys := make([]string, 0, len(t.entries))
	for k := range t.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// transact runs fn in the document's open transaction or a new local one.
func (t *Type) transact(fn func(tx *Transaction) error) error {
	if t.doc == nil {
		return ErrNotIntegrated
	}
	var err error
	t.doc.transact(nil, true, func(tx *Transaction) { err = fn(tx) })
	return err
}

// nextID returns the id for a new struct of the local client.
func (tx *Transaction) nextID() ID {
	return ID{tx.doc.clientID, tx.doc.store.state(tx.doc.clientID)}
}

// insertItem creates a local item with content c between left and right in parent (under
// the key sub when hasSub) and integrates it.
func (tx *Transaction) insertItem(left, right *item, parent *Type, sub string, hasSub bool, c content) *item {
	it := newItem(tx.nextID(), left, right, parent, sub, hasSub, c)
	it.integrate(tx, 0)
	return it
}
