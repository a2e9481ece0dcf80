package yjs

import (
	"maps"
	"strings"
	"unsafe"

	"github.com/nomicore/nomicore/lib0"
)

// Text is a shared text: a sequence of UTF-16 code units with formatting marks and embeds.
// Indexes and lengths count UTF-16 code units (JS String.length); a position inside a
// surrogate pair splits it into two U+FFFD, as JS yjs does.
type Text Type

// NewText returns a preliminary text holding s, to insert into a document as a value.
func NewText(s string) *Text {
	t := newPrelimType(KindText)
	if s != "" {
		t.prelim.text = append(t.prelim.text, textOp{kind: textOpInsert, s: s})
		t.prelim.textLen = int(utf16Len(s))
	}
	return (*Text)(t)
}

// Attrs are formatting attributes: a nil value removes an attribute.
type Attrs map[string]any

// Delta is one operation of a text's content: an inserted string (or embed, or nested type)
// with its attributes.
type Delta struct {
	Insert     any
	Attributes map[string]any
}

func (x *Text) t() *Type { return (*Type)(x) }

// Len returns the length in UTF-16 code units.
func (x *Text) Len() int { return x.length }

// String returns the text (without embeds).
func (x *Text) String() string { return x.t().textString() }

// Insert inserts s at index. attrs nil takes the attributes at that position; otherwise
// the inserted text has exactly attrs.
func (x *Text) Insert(index int, s string, attrs Attrs) error {
	t := x.t()
	if t.isPrelim() {
		return t.recordText(textOp{kind: textOpInsert, index: index, s: s, attrs: attrs})
	}
	var err error
	return t.run(func(tx *Transaction) { err = t.textInsert(tx, index, s, attrs) }, &err)
}

// InsertEmbed inserts an embed (a JSON value, or a preliminary type) at index.
func (x *Text) InsertEmbed(index int, embed any, attrs Attrs) error {
	t := x.t()
	if t.isPrelim() {
		return t.recordText(textOp{kind: textOpEmbed, index: index, embed: embed, attrs: attrs})
	}
	var err error
	return t.run(func(tx *Transaction) { err = t.textInsertEmbed(tx, index, embed, attrs) }, &err)
}

// Delete deletes length units from index.
func (x *Text) Delete(index, length int) error {
	t := x.t()
	if t.isPrelim() {
		return t.recordText(textOp{kind: textOpDelete, index: index, length: length})
	}
	var err error
	return t.run(func(tx *Transaction) { err = t.textDelete(tx, index, length) }, &err)
}

// Format sets attrs on [index, index+length).
func (x *Text) Format(index, length int, attrs Attrs) error {
	t := x.t()
	if t.isPrelim() {
		return t.recordText(textOp{kind: textOpFormat, index: index, length: length, attrs: attrs})
	}
	var err error
	return t.run(func(tx *Transaction) { err = t.textFormat(tx, index, length, attrs) }, &err)
}

// ToDelta returns the content as delta operations.
func (x *Text) ToDelta() []Delta { return x.t().toDelta() }

// ToJSON returns the text (JS toJSON).
func (x *Text) ToJSON() any { return x.String() }

// SetAttribute, GetAttribute, RemoveAttribute and Attributes manage the text's own
// attributes (map entries of the type).
func (x *Text) SetAttribute(key string, value any) error {
	return x.t().transact(func(tx *Transaction) error { return x.t().mapSet(tx, key, value) })
}

// GetAttribute returns a text attribute.
func (x *Text) GetAttribute(key string) (any, bool) { return x.t().mapGet(key) }

// RemoveAttribute removes a text attribute.
func (x *Text) RemoveAttribute(key string) error {
	return x.t().transact(func(tx *Transaction) error { x.t().mapDelete(tx, key); return nil })
}

// isPrelim reports whether the type is preliminary (content is recorded for later).
func (t *Type) isPrelim() bool { return t.doc == nil && t.prelim != nil }

// textOpKind is the method a textOp replays.
type textOpKind uint8

const (
	textOpInsert textOpKind = iota // Text.Insert
	textOpEmbed                    // Text.InsertEmbed
	textOpDelete                   // Text.Delete
	textOpFormat                   // Text.Format
)

// textOp is a change made to a preliminary text, replayed in order when the text is
// integrated.
type textOp struct {
	kind          textOpKind
	index, length int
	s             string
	embed         any
	attrs         Attrs
}

// recordText checks op against the preliminary text t and records it, or returns the
// error the same call on a text in a document would return (and records nothing).
func (t *Type) recordText(op textOp) error {
	n, err := op.check(t.prelim.textLen, map[any]bool{t: true})
	if err != nil {
		return err
	}
	op.attrs = maps.Clone(op.attrs) // the caller may reuse its map
	t.prelim.text = append(t.prelim.text, op)
	t.prelim.textLen = n
	return nil
}

// check returns the length of a text after op, given its length before, or the error
// applying op would return (the checks of textInsert, textInsertEmbed, textDelete and
// textFormat, in their order). seen is as for contentOf.
func (op *textOp) check(length int, seen map[any]bool) (int, error) {
	switch op.kind {
	case textOpInsert:
		if op.s == "" {
			return length, nil
		}
		if op.index < 0 || op.index > length {
			return 0, ErrIndexOutOfRange
		}
		if _, err := attrsOf(op.attrs); err != nil {
			return 0, err
		}
		return length + int(utf16Len(op.s)), nil
	case textOpEmbed:
		if op.index < 0 || op.index > length {
			return 0, ErrIndexOutOfRange
		}
		if typeOf(op.embed) != nil {
			if _, _, err := contentOf(op.embed, seen); err != nil {
				return 0, err
			}
		} else if _, err := normalizeJSON(op.embed); err != nil {
			return 0, err
		}
		if _, err := attrsOf(op.attrs); err != nil {
			return 0, err
		}
		return length + 1, nil
	case textOpDelete, textOpFormat:
		if op.length == 0 {
			return length, nil
		}
		if op.index < 0 || op.length < 0 || op.index+op.length > length {
			return 0, ErrIndexOutOfRange
		}
		if op.kind == textOpDelete {
			return length - op.length, nil
		}
		if _, err := attrsOf(op.attrs); err != nil {
			return 0, err
		}
		return length, nil
	}
	panic("yjs: unknown text change")
}

// apply makes the change op records on t, which is in a document.
func (op *textOp) apply(tx *Transaction, t *Type) error {
	switch op.kind {
	case textOpInsert:
		return t.textInsert(tx, op.index, op.s, op.attrs)
	case textOpEmbed:
		return t.textInsertEmbed(tx, op.index, op.embed, op.attrs)
	case textOpDelete:
		return t.textDelete(tx, op.index, op.length)
	case textOpFormat:
		return t.textFormat(tx, op.index, op.length, op.attrs)
	}
	panic("yjs: unknown text change")
}

// run runs fn in the document's open transaction or a new local one and returns *err (set
// by fn), or ErrNotIntegrated.
func (t *Type) run(fn func(tx *Transaction), err *error) error {
	if t.doc == nil {
		return ErrNotIntegrated
	}
	t.doc.transact(nil, true, fn)
	return *err
}

func (t *Type) textString() string {
	var sb strings.Builder
	for it := t.start; it != nil; it = it.right {
		if it.visible() {
			if it.isString() {
				sb.Write(it.str())
			}
		}
	}
	return sb.String()
}

// attrList is an ordered attribute map (JS Map semantics: insertion order).
type attrList struct {
	keys []string
	vals []any
}

func (a *attrList) index(k string) int {
	for i, x := range a.keys {
		if x == k {
			return i
		}
	}
	return -1
}

func (a *attrList) get(k string) (any, bool) {
	if i := a.index(k); i >= 0 {
		return a.vals[i], true
	}
	return nil, false
}

// getOrNull is JS `map.get(k) ?? null`.
func (a *attrList) getOrNull(k string) any {
	v, _ := a.get(k)
	if _, undef := v.(lib0.Undefined); undef {
		return nil
	}
	return v
}

func (a *attrList) set(k string, v any) {
	if i := a.index(k); i >= 0 {
		a.vals[i] = v
		return
	}
	a.keys = append(a.keys, k)
	a.vals = append(a.vals, v)
}

func (a *attrList) del(k string) {
	if i := a.index(k); i >= 0 {
		a.keys = append(a.keys[:i], a.keys[i+1:]...)
		a.vals = append(a.vals[:i], a.vals[i+1:]...)
	}
}

func (a *attrList) clone() attrList {
	if len(a.keys) == 0 {
		return attrList{}
	}
	return attrList{keys: append([]string(nil), a.keys...), vals: append([]any(nil), a.vals...)}
}

func (a *attrList) toMap() map[string]any {
	m := make(map[string]any, len(a.keys))
	for i, k := range a.keys {
		m[k] = a.vals[i]
	}
	return m
}

// updateAttrs applies a format mark: null removes the key.
func updateAttrs(a *attrList, f *contentFormat) {
	if f.val == nil {
		a.del(f.key)
	} else {
		a.set(f.key, f.val)
	}
}

// textPos is a position between two items of a text with the attributes in effect there.
type textPos struct {
	left, right *item
	index       int
	attrs       attrList
}

func (p *textPos) forward() {
	r := p.right
	if f := r.format(); f != nil {
		if !r.deleted() {
			updateAttrs(&p.attrs, f)
		}
	} else if !r.deleted() {
		p.index += int(r.len())
	}
	p.left = r
	p.right = r.right
}

// findNextPosition moves pos right by count visible units, splitting an item if needed.
func findNextPosition(tx *Transaction, pos *textPos, count int) {
	for pos.right != nil && count > 0 {
		r := pos.right
		if f := r.format(); f != nil {
			if !r.deleted() {
				updateAttrs(&pos.attrs, f)
			}
		} else if !r.deleted() {
			if count < int(r.len()) {
				tx.doc.store.itemCleanStart(tx, ID{r.client(), r.clock() + uint64(count)})
			}
			pos.index += int(r.len())
			count -= int(r.len())
		}
		pos.left = r
		pos.right = r.right
	}
}

// findPosition returns the position at index. Without formatting in the text, search
// markers find it (and the attributes there start empty, as in JS); otherwise the walk
// starts at the beginning and collects the attributes.
func (t *Type) findPosition(tx *Transaction, pos *textPos, index int, useMarkers bool) {
	if useMarkers && !t.hasFormatting && index > 0 && index <= t.length {
		it, s := t.seek(index - 1)
		*pos = textPos{left: it.left, right: it, index: s}
		findNextPosition(tx, pos, index-s)
		return
	}
	*pos = textPos{right: t.start}
	findNextPosition(tx, pos, index)
}

func (t *Type) textInsert(tx *Transaction, index int, s string, attrs Attrs) error {
	if s == "" {
		return nil
	}
	if index < 0 || index > t.length {
		return ErrIndexOutOfRange
	}
	a, err := attrsOf(attrs)
	if err != nil {
		return err
	}
	prev := tx.markerOwner
	tx.markerOwner = t
	var pos textPos
	t.findPosition(tx, &pos, index, attrs == nil)
	if attrs == nil {
		a = pos.attrs.clone()
	}
	t.insertText(tx, &pos, nil, s, a)
	tx.markerOwner = prev
	return nil
}

func (t *Type) textInsertEmbed(tx *Transaction, index int, embed any, attrs Attrs) error {
	if index < 0 || index > t.length {
		return ErrIndexOutOfRange
	}
	var c content
	if typeOf(embed) != nil {
		ct, _, err := contentOf(embed, map[any]bool{t: true})
		if err != nil {
			return err
		}
		c = ct
	} else {
		v, err := normalizeJSON(embed)
		if err != nil {
			return err
		}
		c = &contentEmbed{v: v}
	}
	a, err := attrsOf(attrs)
	if err != nil {
		return err
	}
	prev := tx.markerOwner
	tx.markerOwner = t
	var pos textPos
	t.findPosition(tx, &pos, index, attrs == nil)
	t.insertText(tx, &pos, c, "", a)
	tx.markerOwner = prev
	return nil
}

// attrsOf converts application attributes (sorted by key: a Go map has no order).
func attrsOf(attrs Attrs) (attrList, error) {
	var a attrList
	if len(attrs) == 0 {
		return a, nil
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		v, err := normalizeJSON(attrs[k])
		if err != nil {
			return a, err
		}
		a.set(k, v)
	}
	return a, nil
}

// insertText inserts content c (or the string s when c is nil) at pos with exactly the
// attributes attrs (JS insertText).
func (t *Type) insertText(tx *Transaction, pos *textPos, c content, s string, attrs attrList) {
	for _, k := range pos.attrs.keys {
		if _, ok := attrs.get(k); !ok {
			attrs.set(k, nil)
		}
	}
	minimizeAttributeChanges(pos, &attrs)
	negated := t.insertAttributes(tx, pos, &attrs)
	index := pos.index
	var right *item
	if c == nil {
		right = newStringItem(tx.nextID(), pos.left, pos.right, t, s)
		t.markersInserted(index, int(right.len()))
		right.integrate(tx, 0)
	} else {
		if c.countable() {
			t.markersInserted(index, int(c.len()))
		}
		right = tx.insertItem(pos.left, pos.right, t, "", false, c)
	}
	pos.right = right
	pos.index = index
	pos.forward()
	t.insertNegatedAttributes(tx, pos, &negated)
}

// minimizeAttributeChanges moves right over deleted items and marks that set what attrs
// want already.
func minimizeAttributeChanges(pos *textPos, attrs *attrList) {
	for pos.right != nil {
		r := pos.right
		if r.deleted() {
			pos.forward()
			continue
		}
		if f := r.format(); f != nil && equalAttrs(attrs.getOrNull(f.key), f.val) {
			pos.forward()
			continue
		}
		break
	}
}

// insertAttributes inserts marks for the attributes that differ at pos and returns the
// marks that restore the previous values afterwards.
func (t *Type) insertAttributes(tx *Transaction, pos *textPos, attrs *attrList) attrList {
	var negated attrList
	for i, k := range attrs.keys {
		v := attrs.vals[i]
		cur := pos.attrs.getOrNull(k)
		if !equalAttrs(cur, v) {
			negated.set(k, cur)
			pos.right = tx.insertItem(pos.left, pos.right, t, "", false, &contentFormat{key: k, val: v})
			pos.forward()
		}
	}
	return negated
}

func (t *Type) insertNegatedAttributes(tx *Transaction, pos *textPos, negated *attrList) {
	for pos.right != nil {
		r := pos.right
		if !r.deleted() {
			f := r.format()
			if f == nil {
				break
			}
			v, has := negated.get(f.key)
			if !has || !equalAttrs(v, f.val) {
				break
			}
			negated.del(f.key)
		}
		pos.forward()
	}
	for i, k := range negated.keys {
		pos.right = tx.insertItem(pos.left, pos.right, t, "", false, &contentFormat{key: k, val: negated.vals[i]})
		pos.forward()
	}
}

func (t *Type) textFormat(tx *Transaction, index, length int, attrs Attrs) error {
	if length == 0 {
		return nil
	}
	if index < 0 || length < 0 || index+length > t.length {
		return ErrIndexOutOfRange
	}
	a, err := attrsOf(attrs)
	if err != nil {
		return err
	}
	tx.withOwner(t, func() {
		var pos textPos
		t.findPosition(tx, &pos, index, false)
		if pos.right == nil {
			return
		}
		t.formatText(tx, &pos, length, &a)
	})
	return nil
}

// formatText applies attrs to length units from pos (JS formatText).
func (t *Type) formatText(tx *Transaction, pos *textPos, length int, attrs *attrList) {
	minimizeAttributeChanges(pos, attrs)
	negated := t.insertAttributes(tx, pos, attrs)
loop:
	for pos.right != nil && (length > 0 || (len(negated.keys) > 0 && (pos.right.deleted() || isFormat(pos.right)))) {
		r := pos.right
		if !r.deleted() {
			if f := r.format(); f != nil {
				if attr, has := attrs.get(f.key); has {
					if equalAttrs(attr, f.val) {
						negated.del(f.key)
					} else {
						if length == 0 {
							break loop
						}
						negated.set(f.key, f.val)
					}
					r.delete(tx)
				} else {
					pos.attrs.set(f.key, f.val)
				}
			} else {
				if length < int(r.len()) {
					tx.doc.store.itemCleanStart(tx, ID{r.client(), r.clock() + uint64(length)})
				}
				length -= int(r.len())
			}
		}
		pos.forward()
	}
	if length > 0 {
		nl := newContentString(strings.Repeat("\n", length))
		pos.right = tx.insertItem(pos.left, pos.right, t, "", false, nl)
		pos.forward()
	}
	t.insertNegatedAttributes(tx, pos, &negated)
}

func isFormat(it *item) bool {
	return it.contentRef() == refFormat
}

func (t *Type) textDelete(tx *Transaction, index, length int) error {
	if length == 0 {
		return nil
	}
	if index < 0 || length < 0 || index+length > t.length {
		return ErrIndexOutOfRange
	}
	prev := tx.markerOwner
	tx.markerOwner = t
	var pos textPos
	t.findPosition(tx, &pos, index, true)
	t.deleteText(tx, &pos, length)
	tx.markerOwner = prev
	return nil
}

// deleteText deletes length units from pos and removes the marks made redundant.
func (t *Type) deleteText(tx *Transaction, pos *textPos, length int) {
	startIndex := pos.index
	startLength := length
	startAttrs := pos.attrs.clone()
	start := pos.right
	for length > 0 && pos.right != nil {
		r := pos.right
		if !r.deleted() {
			switch r.contentRef() {
			case refType, refEmbed, refString:
				if length < int(r.len()) {
					tx.doc.store.itemCleanStart(tx, ID{r.client(), r.clock() + uint64(length)})
				}
				length -= int(r.len())
				r.delete(tx)
			}
		}
		pos.forward()
	}
	if start != nil {
		cleanupFormattingGap(tx, start, pos.right, &startAttrs, &pos.attrs)
	}
	t.markersDeleted(startIndex, startLength-length)
}

// cleanupFormattingGap deletes the marks between start and the next visible content that
// are overwritten or change nothing (JS cleanupFormattingGap, including its reliance on
// identity for object values).
func cleanupFormattingGap(tx *Transaction, start, curr *item, startAttrs, currAttrs *attrList) int {
	end := start
	var endFormats map[string]*contentFormat
	for end != nil && (!end.countable() || end.deleted()) {
		if !end.deleted() {
			if f := end.format(); f != nil {
				if endFormats == nil {
					endFormats = map[string]*contentFormat{}
				}
				endFormats[f.key] = f
			}
		}
		end = end.right
	}
	cleanups := 0
	reachedCurr := false
	for start != end {
		if curr == start {
			reachedCurr = true
		}
		if !start.deleted() {
			if f := start.format(); f != nil {
				startVal := startAttrs.getOrNull(f.key)
				if endFormats[f.key] != f || sameValue(startVal, f.val) {
					start.delete(tx)
					cleanups++
					if !reachedCurr && sameValue(currAttrs.getOrNull(f.key), f.val) && !sameValue(startVal, f.val) {
						if startVal == nil {
							currAttrs.del(f.key)
						} else {
							currAttrs.set(f.key, startVal)
						}
					}
				}
				if !reachedCurr && !start.deleted() {
					updateAttrs(currAttrs, f)
				}
			}
		}
		start = start.right
	}
	return cleanups
}

// cleanupContextlessFormattingGap deletes duplicate marks of one key in the gap around item.
func cleanupContextlessFormattingGap(tx *Transaction, it *item) {
	for it != nil && it.right != nil && (it.right.deleted() || !it.right.countable()) {
		it = it.right
	}
	seen := map[string]bool{}
	for it != nil && (it.deleted() || !it.countable()) {
		if !it.deleted() {
			if f := it.format(); f != nil {
				if seen[f.key] {
					it.delete(tx)
				} else {
					seen[f.key] = true
				}
			}
		}
		it = it.left
	}
}

// cleanupTextFormatting cleans the first formatting gap of a text (JS cleanupYTextFormatting;
// its loop only ever cleans the gap before the first content).
func (t *Type) cleanupTextFormatting(tx *Transaction) int {
	res := 0
	start := t.start
	var startAttrs, curAttrs attrList
	for end := t.start; end != nil; end = end.right {
		if end.deleted() {
			continue
		}
		if f := end.format(); f != nil {
			updateAttrs(&curAttrs, f)
			continue
		}
		res += cleanupFormattingGap(tx, start, end, &startAttrs, &curAttrs)
		startAttrs = curAttrs.clone()
		start = end
	}
	return res
}

// cleanupFormattingAfter runs after a remote transaction that changed formatted text
// (JS cleanupYTextAfterTransaction): in a new local transaction, it removes the marks made
// redundant. That transaction is cleaned up after tx.
func (d *Doc) cleanupFormattingAfter(tx *Transaction) {
	var needFull []*Type
	has := func(t *Type) bool {
		for _, x := range needFull {
			if x == t {
				return true
			}
		}
		return false
	}
	for _, b := range tx.before {
		l := d.store.clients[b.client]
		if l.state() == b.clock {
			continue
		}
		// the walk only reads: its position stays valid
		l.each(l.find(b.clock), func(it *item) bool {
			if !it.isGC() && !it.deleted() && isFormat(it) && !has(it.parent) {
				needFull = append(needFull, it.parent)
			}
			return true
		})
	}
	d.transact(nil, true, func(t2 *Transaction) {
		for _, en := range tx.ds.entries {
			l := d.store.clients[en.client]
			if l == nil {
				continue
			}
			state := l.state()
			for _, r := range en.ranges {
				if r.clock >= state {
					break
				}
				d.iterateStructs(tx, l, r.clock, r.len, func(it *item) {
					if it.isGC() || !it.parent.hasFormatting || has(it.parent) {
						return
					}
					if isFormat(it) {
						needFull = append(needFull, it.parent)
					} else {
						cleanupContextlessFormattingGap(t2, it)
					}
				})
			}
		}
		for _, t := range needFull {
			t.cleanupTextFormatting(t2)
		}
	})
}

// iterateStructs calls f for the structs covering [clock, clock+length), splitting at both
// ends (JS iterateStructs). Each struct is found by its clock: a split at the end inserts into
// the list, which may move the structs of a chunk, and f may delete items.
func (d *Doc) iterateStructs(tx *Transaction, l *structList, clock, length uint64, f func(*item)) {
	if length == 0 {
		return
	}
	end := clock + length
	if d.olderDeleteWalk {
		d.iterateStructsAsOlderVersions(tx, l, clock, end, f)
		return
	}
	it := l.at(d.store.cleanStart(tx, l, clock))
	for {
		if end < it.endClock() {
			d.store.cleanStart(tx, l, end)
		}
		next := it.endClock()
		f(it)
		if next >= end || next >= l.state() {
			return
		}
		it = l.at(l.find(next))
	}
}

// toDelta renders the text as delta operations (JS toDelta without snapshots).
func (t *Type) toDelta() []Delta {
	var ops []Delta
	cur := &attrList{}
	var sb strings.Builder
	pack := func() {
		if sb.Len() > 0 {
			d := Delta{Insert: sb.String()}
			if len(cur.keys) > 0 {
				d.Attributes = cur.toMap()
			}
			ops = append(ops, d)
			sb.Reset()
		}
	}
	for n := t.start; n != nil; n = n.right {
		if n.deleted() {
			continue
		}
		switch n.contentRef() {
		case refString:
			sb.Write(n.str())
		case refType, refEmbed:
			pack()
			d := Delta{Insert: n.values(nil)[0]}
			if len(cur.keys) > 0 {
				d.Attributes = cur.toMap()
			}
			ops = append(ops, d)
		case refFormat:
			pack()
			updateAttrs(cur, n.format())
		}
	}
	pack()
	return ops
}

// toDeltaOrdered is toDelta keeping attributes in their JS order (for XML rendering).
func (t *Type) toDeltaOrdered(f func(insert any, attrs *attrList)) {
	cur := &attrList{}
	var sb strings.Builder
	pack := func() {
		if sb.Len() > 0 {
			f(sb.String(), cur)
			sb.Reset()
		}
	}
	for n := t.start; n != nil; n = n.right {
		if n.deleted() {
			continue
		}
		switch n.contentRef() {
		case refString:
			sb.Write(n.str())
		case refType, refEmbed:
			pack()
			f(n.values(nil)[0], cur)
		case refFormat:
			pack()
			updateAttrs(cur, n.format())
		}
	}
	pack()
}

// sameValue is JS ===: primitives by value (NaN differs from itself, -0 equals 0),
// objects, arrays and byte arrays by identity.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case lib0.Undefined:
		_, ok := b.(lib0.Undefined)
		return ok
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case lib0.BigInt:
		y, ok := b.(lib0.BigInt)
		return ok && x == y
	case lib0.Object:
		y, ok := b.(lib0.Object)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	}
	if ta := typeOf(a); ta != nil {
		return ta == typeOf(b)
	}
	if da, ok := a.(*Doc); ok {
		db, ok := b.(*Doc)
		return ok && da == db
	}
	return false
}

// equalAttrs is JS equalAttrs: identical, or two objects whose own properties are
// identical (one level deep).
func equalAttrs(a, b any) bool {
	if sameValue(a, b) {
		return true
	}
	ka, va, okA := objectProps(a)
	kb, vb, okB := objectProps(b)
	if !okA || !okB || len(ka) != len(kb) {
		return false
	}
	for i, k := range ka {
		j := -1
		for x, kk := range kb {
			if kk == k {
				j = x
				break
			}
		}
		if j < 0 || !sameValue(vb[j], va[i]) {
			return false
		}
	}
	return true
}

// objectProps returns the enumerable own properties of an object-like value.
func objectProps(v any) (keys []string, vals []any, ok bool) {
	switch x := v.(type) {
	case lib0.Object:
		for _, f := range x {
			keys = append(keys, f.Key)
			vals = append(vals, f.Value)
		}
		return keys, vals, true
	case []any:
		for i, e := range x {
			keys = append(keys, itoa(i))
			vals = append(vals, e)
		}
		return keys, vals, true
	case []byte:
		for i, e := range x {
			keys = append(keys, itoa(i))
			vals = append(vals, float64(e))
		}
		return keys, vals, true
	}
	return nil, nil, false
}
