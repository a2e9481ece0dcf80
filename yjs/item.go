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
// document order. Its fields are read and written through the accessors below.
type item struct {
	xid          ID
	xlength      uint64
	left, right  *item
	xorigin      ID // the item left of this one at creation (valid with flagOrigin)
	xrightOrigin ID // the item right of this one at creation (valid with flagRightOrigin)
	parent       *Type
	xparentSub   string // the map key (valid with flagParentSub)
	xcontent     content
	flags        uint16
}

func (it *item) id() ID               { return it.xid }
func (it *item) client() uint64       { return it.xid.Client }
func (it *item) clock() uint64        { return it.xid.Clock }
func (it *item) len() uint64          { return it.xlength }
func (it *item) origin() ID           { return it.xorigin }
func (it *item) rightOrigin() ID      { return it.xrightOrigin }
func (it *item) parentSub() string    { return it.xparentSub }
func (it *item) setID(id ID)          { it.xid = id }
func (it *item) setLen(n uint64)      { it.xlength = n }
func (it *item) setClock(c uint64)    { it.xid.Clock = c }
func (it *item) setOrigin(id ID)      { it.xorigin = id; it.flags |= flagOrigin }
func (it *item) setRightOrigin(id ID) { it.xrightOrigin = id; it.flags |= flagRightOrigin }

// setParentSub sets the map key (hasSub) or clears it.
func (it *item) setParentSub(sub string, hasSub bool) {
	if hasSub {
		it.xparentSub = sub
		it.flags |= flagParentSub
	} else {
		it.xparentSub = ""
		it.flags &^= flagParentSub
	}
}

func newItem(id ID, left *item, right *item, parent *Type, parentSub string, hasSub bool, c content) *item {
	it := &item{left: left, right: right, parent: parent}
	it.setID(id)
	it.setContent(c)
	if left != nil {
		it.setOrigin(left.lastID())
	}
	if right != nil {
		it.setRightOrigin(right.id())
	}
	if hasSub {
		it.setParentSub(parentSub, true)
	}
	return it
}

// newStringItem returns a new local item holding s.
func newStringItem(id ID, left, right *item, parent *Type, s string) *item {
	return newItem(id, left, right, parent, "", false, newContentString(s))
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
func (it *item) endClock() uint64 { return it.clock() + it.len() }
func (it *item) lastID() ID       { return ID{it.client(), it.clock() + it.len() - 1} }

func sameOpt(a ID, aok bool, b ID, bok bool) bool { return aok == bok && (!aok || a == b) }

// makeGC turns the struct into a GC struct in place: its content and links are dropped.
func (it *item) makeGC() {
	it.flags = flagGC | flagDeleted
	it.left, it.right, it.parent = nil, nil, nil
	it.dropContent()
	it.setParentSub("", false)
}

// splitItem splits it at diff (0 < diff < length) and returns the right part, linked after
// it. The right part's origin is the left part's last unit. The caller inserts the right
// part into the store.
func splitItem(tx *Transaction, it *item, diff uint64) *item {
	right := &item{}
	right.setID(ID{it.client(), it.clock() + diff})
	right.left = it
	right.right = it.right
	right.parent = it.parent
	right.flags = it.flags &^ (flagMarker | flagOrigin | flagRightOrigin | flagParentSub)
	it.spliceContent(right, diff)
	right.setOrigin(ID{it.client(), it.clock() + diff - 1})
	if it.hasRight() {
		right.setRightOrigin(it.rightOrigin())
	}
	if it.hasSub() {
		right.setParentSub(it.parentSub(), true)
	}
	it.right = right
	if right.right != nil {
		right.right.left = right
	}
	tx.mergeStructs = append(tx.mergeStructs, right)
	if right.hasSub() && right.right == nil {
		right.parent.entries[right.parentSub()] = right
	}
	return right
}

// tryMerge appends right (the store successor of it) onto it when both are the same kind of
// struct and continue each other; it reports whether it did.
func (it *item) tryMerge(right *item) bool {
	if it.isGC() || right.isGC() {
		if it.isGC() && right.isGC() {
			it.setLen(it.len() + right.len())
			return true
		}
		return false
	}
	if right.hasOrigin() && right.origin() == it.lastID() &&
		it.right == right &&
		sameOpt(it.rightOrigin(), it.hasRight(), right.rightOrigin(), right.hasRight()) &&
		it.client() == right.client() && it.endClock() == right.clock() &&
		it.deleted() == right.deleted() &&
		it.contentRef() == right.contentRef() &&
		it.mergeContent(right) {
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
		p.length -= int(it.len())
		if len(p.markers) > 0 && p != tx.markerOwner {
			p.clearMarkers()
		}
	}
	if it.marked() {
		p.dropMarker(it)
	}
	it.markDeleted()
	tx.changes++
	tx.ds.add(it.client(), it.clock(), it.len())
	tx.addChangedType(p, it.parentSub(), it.hasSub())
	if t := it.childType(); t != nil {
		*stack = append(*stack, delFrame{t: t, cur: t.start})
	} else if d := it.subdoc(); d != nil {
		tx.subdocRemoved(d)
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
	if it.clock() < tx.beforeState(it.client()) {
		// deleted earlier: merge it with its neighbours once they are gc'd too
		tx.mergeStructs = append(tx.mergeStructs, it)
	}
	return nil, false
}

// gc drops the content of a deleted item: it becomes a GC struct when its parent is gone
// too, else its content becomes contentDeleted. The content of a nested type becomes GC
// structs (JS ContentType.gc), iteratively.
func (it *item) gc(parentGCd bool) {
	if t := it.childType(); t != nil {
		gcTypes([]*Type{t})
	}
	if parentGCd {
		it.makeGC()
	} else {
		it.dropContent()
	}
}

// gcTypes turns everything in the given deleted types, at any depth, into GC structs.
func gcTypes(stack []*Type) {
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		gcOne := func(it *item) {
			if ct := it.childType(); ct != nil {
				stack = append(stack, ct)
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
		e.WriteVarUint(it.len() - offset)
		return
	}
	hasOrigin := it.hasOrigin()
	var origin ID
	if offset > 0 {
		origin, hasOrigin = ID{it.client(), it.clock() + offset - 1}, true
	} else if hasOrigin {
		origin = it.origin()
	}
	info := it.contentRef()
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
		ro := it.rightOrigin()
		e.WriteVarUint(ro.Client)
		e.WriteVarUint(ro.Clock)
	}
	if !hasOrigin && !it.hasRight() {
		p := it.parent
		if p.item == nil {
			e.WriteVarUint(1)
			e.WriteVarString(p.rootName)
		} else {
			e.WriteVarUint(0)
			e.WriteVarUint(p.item.client())
			e.WriteVarUint(p.item.clock())
		}
		if it.hasSub() {
			e.WriteVarString(it.parentSub())
		}
	}
	it.writeContent(e, offset)
}
