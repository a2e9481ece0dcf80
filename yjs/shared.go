package yjs

import (
	"sort"
	"strings"
	"unicode/utf16"
)

// Map is a shared map from string keys to values.
type Map Type

// NewMap returns a preliminary map, to insert into a document as a value.
func NewMap() *Map { return (*Map)(newPrelimType(KindMap)) }

func (m *Map) t() *Type { return (*Type)(m) }

// Set sets key to value: a JSON-like Go value (nil, bool, numbers, string, slices, maps,
// lib0 values), []byte, a *Doc (subdocument) or a preliminary type.
func (m *Map) Set(key string, value any) error {
	t := m.t()
	if t.doc == nil && t.prelim != nil {
		if _, _, err := contentOf(value, map[any]bool{t: true}); err != nil {
			return err
		}
		t.prelim.set(key, value)
		return nil
	}
	return t.transact(func(tx *Transaction) error { return t.mapSet(tx, key, value) })
}

// Get returns the value of key. Nested types are returned as *Map, *Array, *Text, …
func (m *Map) Get(key string) (any, bool) { return m.t().mapGet(key) }

// Has reports whether key has a value.
func (m *Map) Has(key string) bool { _, ok := m.t().mapGet(key); return ok }

// Delete removes key.
func (m *Map) Delete(key string) error {
	t := m.t()
	if t.doc == nil && t.prelim != nil {
		t.prelim.del(key)
		return nil
	}
	return t.transact(func(tx *Transaction) error { t.mapDelete(tx, key); return nil })
}

// Keys returns the keys with a value, sorted.
func (m *Map) Keys() []string { return m.t().mapKeys() }

// Len returns the number of keys with a value.
func (m *Map) Len() int { return len(m.t().mapKeys()) }

// Entries returns the entries, keys sorted.
func (m *Map) Entries() []MapEntry {
	keys := m.Keys()
	out := make([]MapEntry, len(keys))
	for i, k := range keys {
		v, _ := m.Get(k)
		out[i] = MapEntry{Key: k, Value: v}
	}
	return out
}

// MapEntry is a key and its value.
type MapEntry struct {
	Key   string
	Value any
}

// ToJSON returns the map as plain JSON values (see Doc.ToJSON).
func (m *Map) ToJSON() any { return m.t().toJSON() }

func (p *prelim) set(key string, value any) {
	if _, ok := p.values[key]; !ok {
		p.keys = append(p.keys, key)
	}
	p.values[key] = value
}

func (p *prelim) del(key string) {
	if _, ok := p.values[key]; !ok {
		return
	}
	delete(p.values, key)
	for i, k := range p.keys {
		if k == key {
			p.keys = append(p.keys[:i], p.keys[i+1:]...)
			return
		}
	}
}

// Array is a shared sequence of values.
type Array Type

// NewArray returns a preliminary array holding values, to insert into a document.
func NewArray(values ...any) *Array {
	t := newPrelimType(KindArray)
	t.prelim.list = append(t.prelim.list, values...)
	return (*Array)(t)
}

func (a *Array) t() *Type { return (*Type)(a) }

// Len returns the number of elements.
func (a *Array) Len() int {
	if t := a.t(); t.doc == nil && t.prelim != nil {
		return len(t.prelim.list)
	}
	return a.length
}

// Insert inserts values at index (see Map.Set for the kinds of values).
func (a *Array) Insert(index int, values ...any) error { return a.t().seqInsert(index, values) }

// Push appends values.
func (a *Array) Push(values ...any) error { return a.t().seqPush(values) }

// Delete removes length elements from index.
func (a *Array) Delete(index, length int) error { return a.t().seqDelete(index, length) }

// Get returns the element at index.
func (a *Array) Get(index int) (any, bool) { return a.t().listGet(index) }

// Slice returns the elements in [start, end).
func (a *Array) Slice(start, end int) []any { return a.t().listSlice(start, end) }

// ToSlice returns every element.
func (a *Array) ToSlice() []any { return a.t().listAll() }

// ToJSON returns the array as plain JSON values.
func (a *Array) ToJSON() any { return a.t().toJSON() }

func (t *Type) seqInsert(index int, values []any) error {
	if t.doc == nil && t.prelim != nil {
		if index < 0 || index > len(t.prelim.list) {
			return ErrIndexOutOfRange
		}
		if _, err := piecesOf(t, values); err != nil {
			return err
		}
		t.prelim.list = append(t.prelim.list[:index:index], append(append([]any(nil), values...), t.prelim.list[index:]...)...)
		return nil
	}
	return t.transact(func(tx *Transaction) error { return t.listInsert(tx, index, values) })
}

func (t *Type) seqPush(values []any) error {
	if t.doc == nil && t.prelim != nil {
		return t.seqInsert(len(t.prelim.list), values)
	}
	return t.transact(func(tx *Transaction) error { return t.listPush(tx, values) })
}

func (t *Type) seqDelete(index, length int) error {
	if t.doc == nil && t.prelim != nil {
		if index < 0 || length < 0 || index+length > len(t.prelim.list) {
			return ErrIndexOutOfRange
		}
		t.prelim.list = append(t.prelim.list[:index:index], t.prelim.list[index+length:]...)
		return nil
	}
	return t.transact(func(tx *Transaction) error { return t.listDelete(tx, index, length) })
}

// XmlFragment is a shared sequence of XML nodes (XmlElement, XmlText).
type XmlFragment Type

// NewXmlFragment returns a preliminary XML fragment.
func NewXmlFragment() *XmlFragment { return (*XmlFragment)(newPrelimType(KindXmlFragment)) }

func (f *XmlFragment) t() *Type { return (*Type)(f) }

// Len returns the number of children.
func (f *XmlFragment) Len() int { return (*Array)(f).Len() }

// Insert inserts nodes at index.
func (f *XmlFragment) Insert(index int, nodes ...any) error { return f.t().seqInsert(index, nodes) }

// Push appends nodes.
func (f *XmlFragment) Push(nodes ...any) error { return f.t().seqPush(nodes) }

// Delete removes length children from index.
func (f *XmlFragment) Delete(index, length int) error { return f.t().seqDelete(index, length) }

// Get returns the child at index.
func (f *XmlFragment) Get(index int) (any, bool) { return f.t().listGet(index) }

// Children returns every child.
func (f *XmlFragment) Children() []any { return f.t().listAll() }

// String renders the fragment as XML (JS toString).
func (f *XmlFragment) String() string { return f.t().render() }

// ToJSON returns String() (JS toJSON).
func (f *XmlFragment) ToJSON() any { return f.String() }

// XmlElement is an XML element: a node name, attributes and children.
type XmlElement Type

// NewXmlElement returns a preliminary element.
func NewXmlElement(nodeName string) *XmlElement {
	t := newPrelimType(KindXmlElement)
	t.nodeName = nodeName
	return (*XmlElement)(t)
}

func (e *XmlElement) t() *Type { return (*Type)(e) }

// NodeName returns the element name.
func (e *XmlElement) NodeName() string { return e.nodeName }

// Len returns the number of children.
func (e *XmlElement) Len() int { return (*Array)(e).Len() }

// Insert inserts nodes at index.
func (e *XmlElement) Insert(index int, nodes ...any) error { return e.t().seqInsert(index, nodes) }

// Push appends nodes.
func (e *XmlElement) Push(nodes ...any) error { return e.t().seqPush(nodes) }

// Delete removes length children from index.
func (e *XmlElement) Delete(index, length int) error { return e.t().seqDelete(index, length) }

// Get returns the child at index.
func (e *XmlElement) Get(index int) (any, bool) { return e.t().listGet(index) }

// Children returns every child.
func (e *XmlElement) Children() []any { return e.t().listAll() }

// SetAttribute sets an attribute.
func (e *XmlElement) SetAttribute(key string, value any) error { return (*Map)(e).Set(key, value) }

// GetAttribute returns an attribute.
func (e *XmlElement) GetAttribute(key string) (any, bool) { return e.t().mapGet(key) }

// RemoveAttribute removes an attribute.
func (e *XmlElement) RemoveAttribute(key string) error { return (*Map)(e).Delete(key) }

// Attributes returns the attribute names, sorted.
func (e *XmlElement) Attributes() []string { return e.t().mapKeys() }

// String renders the element as XML (JS toString).
func (e *XmlElement) String() string { return e.t().render() }

// ToJSON returns String() (JS toJSON).
func (e *XmlElement) ToJSON() any { return e.String() }

// XmlText is formatted text inside XML.
type XmlText Type

// NewXmlText returns a preliminary XML text holding s.
func NewXmlText(s string) *XmlText {
	t := (*Type)(NewText(s))
	t.kind = KindXmlText
	return (*XmlText)(t)
}

// Text returns the text view (insert, delete, format …).
func (x *XmlText) Text() *Text { return (*Text)(x) }

// String renders the text with its formatting as XML tags (JS toString).
func (x *XmlText) String() string { return (*Type)(x).render() }

// ToJSON returns String() (JS toJSON).
func (x *XmlText) ToJSON() any { return x.String() }

// XmlHook is a named map that stands for a custom node (only decoded and rendered).
type XmlHook Type

// HookName returns the hook name.
func (h *XmlHook) HookName() string { return h.nodeName }

// Map returns the map view of the hook.
func (h *XmlHook) Map() *Map { return (*Map)(h) }

// toJSON is the JS toJSON of a type, converted to plain JSON values.
func (t *Type) toJSON() any { return t.toJSONAt(0) }

func (t *Type) toJSONAt(depth int) any {
	if depth > maxTypeDepth {
		return map[string]any{"$truncated": true}
	}
	switch t.kind {
	case KindMap, KindXmlHook:
		out := map[string]any{}
		for k, it := range t.entries {
			if !it.deleted() {
				out[k] = jsonValueAt(entryValue(it), depth)
			}
		}
		return out
	case KindArray:
		vals := t.listAll()
		out := make([]any, len(vals))
		for i, v := range vals {
			out[i] = jsonValueAt(v, depth)
		}
		return out
	case KindText:
		return t.textString()
	case KindXmlElement, KindXmlFragment, KindXmlText:
		return t.renderAt(depth)
	}
	return t.inferred().toJSONAs()
}

// entryValue is the value of a map entry item (JS getContent()[length-1]).
func entryValue(it *item) any {
	vals := it.values(nil)
	i := int(it.len()) - 1
	if i < 0 || i >= len(vals) {
		return undefined
	}
	return vals[i]
}

// inferredType is an untyped root seen as the kind its content suggests (inferred).
type inferredType struct {
	t    *Type
	kind Kind
}

// inferred views t as the kind its content suggests: keyed items → map; string, format or
// embed content → text; otherwise array.
func (t *Type) inferred() inferredType { return inferredType{t, t.inferKind()} }

func (t *Type) inferKind() Kind {
	if t.kind != KindUnknown {
		return t.kind
	}
	if len(t.entries) > 0 {
		return KindMap
	}
	for it := t.start; it != nil; it = it.right {
		switch it.contentRef() {
		case refString, refFormat, refEmbed:
			return KindText
		}
	}
	return KindArray
}

func (x inferredType) toJSONAs() any {
	saved := x.t.kind
	x.t.kind = x.kind
	defer func() { x.t.kind = saved }()
	if x.kind == KindUnknown {
		return nil
	}
	return x.t.toJSON()
}

// render is the JS toString of a type (XML types; text for Text; "[object Object]" for
// others).
func (t *Type) render() string { return t.renderAt(0) }

func (t *Type) renderAt(depth int) string {
	if depth > maxTypeDepth {
		return "[truncated]"
	}
	switch t.kind {
	case KindText:
		return t.textString()
	case KindXmlFragment:
		var sb strings.Builder
		for _, v := range t.listAll() {
			sb.WriteString(jsStringAt(v, depth))
		}
		return sb.String()
	case KindXmlElement:
		var sb strings.Builder
		name := jsLowerCase(t.nodeName)
		sb.WriteString("<")
		sb.WriteString(name)
		keys := make([]string, 0, len(t.entries))
		for k, it := range t.entries {
			if !it.deleted() {
				keys = append(keys, k)
			}
		}
		sortUTF16(keys)
		for _, k := range keys {
			sb.WriteString(" ")
			sb.WriteString(k)
			sb.WriteString(`="`)
			sb.WriteString(jsStringAt(entryValue(t.entries[k]), depth))
			sb.WriteString(`"`)
		}
		sb.WriteString(">")
		for _, v := range t.listAll() {
			sb.WriteString(jsStringAt(v, depth))
		}
		sb.WriteString("</")
		sb.WriteString(name)
		sb.WriteString(">")
		return sb.String()
	case KindXmlText:
		var sb strings.Builder
		t.toDeltaOrdered(func(insert any, attrs *attrList) {
			type node struct {
				name  string
				attrs [][2]string
			}
			nodes := make([]node, 0, len(attrs.keys))
			for i, name := range attrs.keys {
				n := node{name: name}
				keys, vals := forInProps(attrs.vals[i])
				for j, k := range keys {
					n.attrs = append(n.attrs, [2]string{k, jsStringAt(vals[j], depth)})
				}
				sort.SliceStable(n.attrs, func(a, b int) bool { return lessUTF16(n.attrs[a][0], n.attrs[b][0]) })
				nodes = append(nodes, n)
			}
			sort.SliceStable(nodes, func(a, b int) bool { return lessUTF16(nodes[a].name, nodes[b].name) })
			for _, n := range nodes {
				sb.WriteString("<" + n.name)
				for _, a := range n.attrs {
					sb.WriteString(" " + a[0] + `="` + a[1] + `"`)
				}
				sb.WriteString(">")
			}
			sb.WriteString(jsStringAt(insert, depth))
			for i := len(nodes) - 1; i >= 0; i-- {
				sb.WriteString("</" + nodes[i].name + ">")
			}
		})
		return sb.String()
	}
	return "[object Object]"
}

// forInProps lists what JS `for (key in v)` enumerates, with the values.
func forInProps(v any) ([]string, []any) {
	switch x := v.(type) {
	case string:
		var keys []string
		var vals []any
		units := utf16.Encode([]rune(x))
		for i, u := range units {
			keys = append(keys, itoa(i))
			if utf16.IsSurrogate(rune(u)) {
				vals = append(vals, "\uFFFD")
			} else {
				vals = append(vals, string(rune(u)))
			}
		}
		return keys, vals
	}
	keys, vals, _ := objectProps(v)
	return keys, vals
}

// lessUTF16 orders strings as JS does (by UTF-16 code units).
func lessUTF16(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func sortUTF16(s []string) { sort.SliceStable(s, func(i, j int) bool { return lessUTF16(s[i], s[j]) }) }

// jsLowerCase is String.prototype.toLowerCase (full case mapping of U+0130 included).
func jsLowerCase(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307")), "\u0130", "i\u0307")
}

// ToJSON returns every root as plain JSON values: a root typed by the application as its
// kind, an untyped root as the kind its content suggests (keyed items → map; string,
// format or embed content → text; otherwise array; the project's JSON rules in
// docs/decisions.md#yjs).
// Maps become map[string]any, arrays []any, texts strings, XML its rendering; Uint8Array → {"$bytes":hex}, bigint → {"$bigint":"n"},
// subdocument → {"$doc":guid}, undefined → {"$undefined":true}, NaN and ±Infinity →
// {"$number":…}, -0 → 0.
func (d *Doc) ToJSON() map[string]any {
	out := make(map[string]any, len(d.roots))
	for name, t := range d.roots {
		out[name] = t.toJSON()
	}
	return out
}
