package yjs

import "github.com/nomicore/nomicore/lib0"

// Item flags.
const (
	flagKeep        uint16 = 1 << iota // never garbage-collect (kept for parity with JS; unused)
	flagCountable                      // the content counts in sequence lengths
	flagDeleted                        // the item is deleted (a GC struct always is)
	flagMarker                         // a search marker of the parent points here
	flagOrigin                         // origin is set
	flagRightOrigin                    // rightOrigin is set
	flagParentSub                      // parentSub is set (a map entry)
	flagGC                             // a GC struct: a deleted range whose content is gone
)

// item is one struct of the store: either a GC struct (flagGC: only id and length mean
// anything) or a Yjs Item — content placed in a parent type between origin and rightOrigin.
// left and right link the items of one parent sequence (or the history of one map key) in
// document order.
type item struct {
	id          ID
	length      uint64
	left, right *item
	origin      ID // the item left of this one at creation (valid with flagOrigin)
	rightOrigin ID // the item right of this one at creation (valid with flagRightOrigin)
	parent      *Type
	parentSub   string // the map key (valid with flagParentSub)
	content     content
	flags       uint16
}

func newItem(id ID, left *item, right *item, parent *Type, parentSub string, hasSub bool, c content) *item {
	it := &item{id: id, length: c.len(), left: left, right: right, parent: parent, content: c}
	if left != nil {
		it.origin = left.lastID()
		it.flags |= flagOrigin
	}
	if right != nil {
		it.rightOrigin = right.id
		it.flags |= flagRightOrigin
	}
	if hasSub {
		it.parentSub = parentSub
		it.flags |= flagParentSub
	}
	if c.countable() {
		it.flags |= flagCountable
	}
	return it
}

// stringItem allocates an Item with its string content (and a small buffer for it) in one
// allocation: typing creates one per character.
type stringItem struct {
	item
	str contentString
	buf [8]byte
}

// newStringItem returns a new local item holding s.
func newStringItem(id ID, left, right *item, parent *Type, s string) *item {
	si := &stringItem{}
	if len(s) <= len(si.buf) {
		si.str.b = si.buf[:copy(si.buf[:], s)]
	} else {
		si.str.b = []byte(s)
	}
	si.str.u16 = utf16Len(s)
	it := &si.item
	*it = item{id: id, length: si.str.u16, left: left, right: right, parent: parent, content: &si.str, flags: flagCountable}
	if left != nil {
		it.origin = left.lastID()
		it.flags |= flagOrigin
	}
	if right != nil {
		it.rightOrigin = right.id
		it.flags |= flagRightOrigin
	}
	return it
}

// stringItemFrom returns an item holding a copy of b (valid UTF-8).
func stringItemFrom(b []byte) (*item, *contentString) {
	si := &stringItem{}
	if len(b) <= len(si.buf) {
		si.str.b = si.buf[:copy(si.buf[:], b)]
	} else {
		si.str.b = append(make([]byte, 0, len(b)), b...)
	}
	si.str.u16 = utf16LenBytes(b)
	si.item.content = &si.str
	return &si.item, &si.str
}

func (it *item) isGC() bool       { return it.flags&flagGC != 0 }
func (it *item) deleted() bool    { return it.flags&flagDeleted != 0 }
func (it *item) countable() bool  { return it.flags&flagCountable != 0 }
func (it *item) hasOrigin() bool  { return it.flags&flagOrigin != 0 }
func (it *item) hasRight() bool   { return it.flags&flagRightOrigin != 0 }
func (it *item) hasSub() bool     { return it.flags&flagParentSub != 0 }
func (it *item) marked() bool     { return it.flags&flagMarker != 0 }
func (it *item) visible() bool    { return it.flags&(flagCountable|flagDeleted) == flagCountable }
func (it *item) keep() bool       { return it.flags&flagKeep != 0 }
func (it *item) markDeleted()     { it.flags |= flagDeleted }
func (it *item) endClock() uint64 { return it.id.Clock + it.length }
func (it *item) lastID() ID       { return ID{it.id.Client, it.id.Clock + it.length - 1} }

func sameOpt(a ID, aok bool, b ID, bok bool) bool { return aok == bok && (!aok || a == b) }

// makeGC turns the struct into a GC struct in place: its content and links are dropped.
func (it *item) makeGC() {
	it.flags = flagGC | flagDeleted
	it.left, it.right, it.parent, it.content, it.parentSub = nil, nil, nil, nil, ""
}

// splitItem splits it at diff (0 < diff < length) and returns the right part, linked after
// it. The right part's origin is the left part's last unit. The caller inserts the right
// part into the store.
func splitItem(tx *Transaction, it *item, diff uint64) *item {
	var right *item
	if cs, ok := it.content.(*contentString); ok {
		si := &stringItem{}
		cs.spliceInto(&si.str, diff)
		right = &si.item
		right.content = &si.str
	} else {
		right = &item{content: it.content.splice(diff)}
	}
	right.id = ID{it.id.Client, it.id.Clock + diff}
	right.length = it.length - diff
	right.left = it
	right.right = it.right
	right.origin = ID{it.id.Client, it.id.Clock + diff - 1}
	right.rightOrigin = it.rightOrigin
	right.parent = it.parent
	right.parentSub = it.parentSub
	right.flags = (it.flags &^ flagMarker) | flagOrigin
	it.length = diff
	it.right = right
	if right.right != nil {
		right.right.left = right
	}
	tx.mergeStructs = append(tx.mergeStructs, right)
	if right.hasSub() && right.right == nil {
		right.parent.entries[right.parentSub] = right
	}
	return right
}

// tryMerge appends right (the store successor of it) onto it when both are the same kind of
// struct and continue each other; it reports whether it did.
func (it *item) tryMerge(right *item) bool {
	if it.isGC() || right.isGC() {
		if it.isGC() && right.isGC() {
			it.length += right.length
			return true
		}
		return false
	}
	if right.hasOrigin() && right.origin == it.lastID() &&
		it.right == right &&
		sameOpt(it.rightOrigin, it.hasRight(), right.rightOrigin, right.hasRight()) &&
		it.id.Client == right.id.Client && it.id.Clock+it.length == right.id.Clock &&
		it.deleted() == right.deleted() &&
		it.content.ref() == right.content.ref() &&
		it.content.merge(right.content) {
		if right.marked() && it.parent != nil {
			it.parent.markerMerged(it, right)
		}
		if right.keep() {
			it.flags |= flagKeep
		}
		it.right = right.right
		if it.right != nil {
			it.right.left = it
		}
		it.length += right.length
		return true
	}
	return false
}

// delete marks the item deleted within tx. Deleting a nested type deletes everything in
// it, depth first as JS does (with an explicit stack: nesting depth is not bounded).
func (it *item) delete(tx *Transaction) {
	if it.deleted() {
		return
	}
	var stack []delFrame
	it.deleteOne(tx, &stack)
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		child, done := f.next(tx)
		if done {
			tx.unchanged(f.t)
			stack = stack[:len(stack)-1]
			continue
		}
		if child != nil {
			child.deleteOne(tx, &stack)
		}
	}
}

// deleteOne marks one item deleted; a nested type is pushed to have its content deleted.
func (it *item) deleteOne(tx *Transaction, stack *[]delFrame) {
	p := it.parent
	if it.countable() && !it.hasSub() {
		p.length -= int(it.length)
		if len(p.markers) > 0 && p != tx.markerOwner {
			p.clearMarkers()
		}
	}
	if it.marked() {
		p.dropMarker(it)
	}
	it.markDeleted()
	tx.changes++
	tx.ds.add(it.id.Client, it.id.Clock, it.length)
	tx.addChangedType(p, it.parentSub, it.hasSub())
	switch c := it.content.(type) {
	case *contentType:
		*stack = append(*stack, delFrame{t: c.t, cur: c.t.start})
	case *contentDoc:
		tx.subdocRemoved(c.doc)
	}
}

// delFrame walks the content of a type being deleted (JS ContentType.delete): its
// sequence, then the newest item of each map key.
type delFrame struct {
	t      *Type
	cur    *item    // next sequence item
	keys   []string // map keys, once the sequence is done
	ki     int
	inKeys bool
}

// next returns the next item to delete (nil when the item visited was deleted already)
// or done.
func (f *delFrame) next(tx *Transaction) (child *item, done bool) {
	var it *item
	switch {
	case f.cur != nil:
		it = f.cur
		f.cur = it.right
	case !f.inKeys:
		f.inKeys = true
		f.keys = f.t.sortedKeys()
		return nil, false
	case f.ki < len(f.keys):
		it = f.t.entries[f.keys[f.ki]]
		f.ki++
	default:
		return nil, true
	}
	if !it.deleted() {
		return it, false
	}
	if it.id.Clock < tx.beforeState(it.id.Client) {
		// deleted earlier: merge it with its neighbours once they are gc'd too
		tx.mergeStructs = append(tx.mergeStructs, it)
	}
	return nil, false
}

// gc drops the content of a deleted item: it becomes a GC struct when its parent is gone
// too, else its content becomes contentDeleted. The content of a nested type becomes GC
// structs (JS ContentType.gc), iteratively.
func (it *item) gc(parentGCd bool) {
	if ct, ok := it.content.(*contentType); ok {
		gcTypes([]*Type{ct.t})
	}
	if parentGCd {
		it.makeGC()
	} else {
		it.content = &contentDeleted{n: it.length}
		it.flags &^= flagCountable
	}
}

// gcTypes turns everything in the given deleted types, at any depth, into GC structs.
func gcTypes(stack []*Type) {
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		gcOne := func(it *item) {
			if ct, ok := it.content.(*contentType); ok {
				stack = append(stack, ct.t)
			}
			it.makeGC()
		}
		for it := t.start; it != nil; {
			next := it.right
			gcOne(it)
			it = next
		}
		t.start = nil
		for _, it := range t.entries {
			for it != nil {
				left := it.left
				gcOne(it)
				it = left
			}
		}
		t.entries = make(map[string]*item)
		t.markers = nil
	}
}

// write encodes the struct from offset on (offset > 0 writes the tail whose origin is the
// unit before it).
func (it *item) write(e *lib0.Encoder, offset uint64) {
	if it.isGC() {
		e.WriteUint8(refGC)
		e.WriteVarUint(it.length - offset)
		return
	}
	origin, hasOrigin := it.origin, it.hasOrigin()
	if offset > 0 {
		origin, hasOrigin = ID{it.id.Client, it.id.Clock + offset - 1}, true
	}
	info := it.content.ref()
	if hasOrigin {
		info |= 0x80
	}
	if it.hasRight() {
		info |= 0x40
	}
	if it.hasSub() {
		info |= 0x20
	}
	e.WriteUint8(info)
	if hasOrigin {
		e.WriteVarUint(origin.Client)
		e.WriteVarUint(origin.Clock)
	}
	if it.hasRight() {
		e.WriteVarUint(it.rightOrigin.Client)
		e.WriteVarUint(it.rightOrigin.Clock)
	}
	if !hasOrigin && !it.hasRight() {
		p := it.parent
		if p.item == nil {
			e.WriteVarUint(1)
			e.WriteVarString(p.rootName)
		} else {
			e.WriteVarUint(0)
			e.WriteVarUint(p.item.id.Client)
			e.WriteVarUint(p.item.id.Clock)
		}
		if it.hasSub() {
			e.WriteVarString(it.parentSub)
		}
	}
	it.content.write(e, offset)
}
