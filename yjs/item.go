package yjs

import (
	"math"
	"unsafe"

	"github.com/nomicore/nomicore/lib0"
)

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
	flagWide                           // the item's values are in an itemWide (see item)
	flagStrHeader                      // string data starts with its byte count (content.go)
)

// item is one struct of the store: either a GC struct (flagGC: only id and length mean
// anything) or a Yjs Item — content placed in a parent type between origin and rightOrigin.
// left and right link the items of one parent sequence (or the history of one map key) in
// document order.
//
// A document holds one item per struct, so the layout is compact: 64 bytes. The ids,
// length and origins are kept as 32-bit numbers, which holds them for every struct that
// JS yjs creates (random 32-bit client ids; clocks count one client's edits). An item whose
// values do not fit keeps them in an itemWide instead (flagWide), which data then points
// to; an item with a map key (flagParentSub) keeps the key and its data in a keyedData.
// data is the content's data by content ref (content.go): no separate content object for
// strings and deleted content. Everything is read and written through the accessors below.
type item struct {
	left, right *item
	parent      *Type
	// the content's data; with flagWide the *itemWide, else with flagParentSub the *keyedData,
	// that holds it
	data unsafe.Pointer

	// with flagWide these are unused
	idClient, idClock         uint32
	length                    uint32
	originClient, originClock uint32 // the item left of this one at creation (flagOrigin)
	rightClient, rightClock   uint32 // the item right of this one at creation (flagRightOrigin)

	flags uint16
	ref   uint8 // content ref; refGC for a GC struct (refSkip for a Skip struct of an update)
}

// itemWide holds the values of an item that do not fit its compact fields.
type itemWide struct {
	id          ID
	length      uint64
	origin      ID
	rightOrigin ID
	parentSub   string
	data        unsafe.Pointer
}

// keyedData is the map key of an item that has compact values, and its content's data.
type keyedData struct {
	key  string
	data unsafe.Pointer
}

func fits32(v uint64) bool { return v <= math.MaxUint32 }

func (it *item) wide() *itemWide   { return (*itemWide)(it.data) }
func (it *item) keyed() *keyedData { return (*keyedData)(it.data) }

// widen moves the item's values into an itemWide (once) and returns it.
func (it *item) widen() *itemWide {
	if it.flags&flagWide != 0 {
		return it.wide()
	}
	w := &itemWide{
		id:          it.id(),
		length:      uint64(it.length),
		origin:      ID{uint64(it.originClient), uint64(it.originClock)},
		rightOrigin: ID{uint64(it.rightClient), uint64(it.rightClock)},
		data:        it.data,
	}
	if it.flags&flagParentSub != 0 {
		w.parentSub, w.data = it.keyed().key, it.keyed().data
	}
	it.idClient, it.idClock, it.length = 0, 0, 0
	it.originClient, it.originClock, it.rightClient, it.rightClock = 0, 0, 0, 0
	it.data = unsafe.Pointer(w)
	it.flags |= flagWide
	return w
}

func (it *item) id() ID {
	if it.flags&flagWide != 0 {
		return it.wide().id
	}
	return ID{uint64(it.idClient), uint64(it.idClock)}
}

func (it *item) client() uint64 {
	if it.flags&flagWide != 0 {
		return it.wide().id.Client
	}
	return uint64(it.idClient)
}

func (it *item) clock() uint64 {
	if it.flags&flagWide != 0 {
		return it.wide().id.Clock
	}
	return uint64(it.idClock)
}

// len is the number of clock units of the struct.
func (it *item) len() uint64 {
	if it.flags&flagWide != 0 {
		return it.wide().length
	}
	return uint64(it.length)
}

// origin is valid with hasOrigin.
func (it *item) origin() ID {
	if it.flags&flagWide != 0 {
		return it.wide().origin
	}
	return ID{uint64(it.originClient), uint64(it.originClock)}
}

// rightOrigin is valid with hasRight.
func (it *item) rightOrigin() ID {
	if it.flags&flagWide != 0 {
		return it.wide().rightOrigin
	}
	return ID{uint64(it.rightClient), uint64(it.rightClock)}
}

// parentSub is the map key (valid with hasSub).
func (it *item) parentSub() string {
	switch {
	case it.flags&flagWide != 0:
		return it.wide().parentSub
	case it.flags&flagParentSub != 0:
		return it.keyed().key
	}
	return ""
}

// cdata is the content's data.
func (it *item) cdata() unsafe.Pointer {
	switch {
	case it.flags&flagWide != 0:
		return it.wide().data
	case it.flags&flagParentSub != 0:
		return it.keyed().data
	}
	return it.data
}

func (it *item) setCData(p unsafe.Pointer) {
	switch {
	case it.flags&flagWide != 0:
		it.wide().data = p
	case it.flags&flagParentSub != 0:
		it.keyed().data = p
	default:
		it.data = p
	}
}

func (it *item) setID(id ID) {
	if it.flags&flagWide == 0 && fits32(id.Client) && fits32(id.Clock) {
		it.idClient, it.idClock = uint32(id.Client), uint32(id.Clock)
		return
	}
	it.widen().id = id
}

func (it *item) setClock(c uint64) { it.setID(ID{it.client(), c}) }

func (it *item) setLen(n uint64) {
	if it.flags&flagWide == 0 && fits32(n) {
		it.length = uint32(n)
		return
	}
	it.widen().length = n
}

func (it *item) setOrigin(id ID) {
	it.flags |= flagOrigin
	if it.flags&flagWide == 0 && fits32(id.Client) && fits32(id.Clock) {
		it.originClient, it.originClock = uint32(id.Client), uint32(id.Clock)
		return
	}
	it.widen().origin = id
}

func (it *item) setRightOrigin(id ID) {
	it.flags |= flagRightOrigin
	if it.flags&flagWide == 0 && fits32(id.Client) && fits32(id.Clock) {
		it.rightClient, it.rightClock = uint32(id.Client), uint32(id.Clock)
		return
	}
	it.widen().rightOrigin = id
}

// setParentSub sets the map key (hasSub) or clears it.
func (it *item) setParentSub(sub string, hasSub bool) {
	switch {
	case it.flags&flagWide != 0:
		it.wide().parentSub = sub
	case it.flags&flagParentSub != 0 && hasSub:
		it.keyed().key = sub
	case it.flags&flagParentSub != 0:
		it.data = it.keyed().data
	case hasSub:
		it.data = unsafe.Pointer(&keyedData{key: sub, data: it.data})
	}
	if hasSub {
		it.flags |= flagParentSub
	} else {
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

// newStringItem returns a new local item holding s (not empty).
func newStringItem(id ID, left, right *item, parent *Type, s string) *item {
	it := &item{left: left, right: right, parent: parent, ref: refString, flags: flagCountable}
	it.setID(id)
	units := utf16Len(s)
	it.setLen(units)
	it.setStringCopy(s, units == uint64(len(s)))
	if left != nil {
		it.setOrigin(left.lastID())
	}
	if right != nil {
		it.setRightOrigin(right.id())
	}
	return it
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
	it.setParentSub("", false)
	it.flags = it.flags&flagWide | flagGC | flagDeleted
	it.left, it.right, it.parent = nil, nil, nil
	it.dropContent()
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
	right.flags |= it.flags &^ (flagMarker | flagOrigin | flagRightOrigin | flagParentSub | flagWide | flagStrHeader)
	if tx.doc.open.it == it {
		tx.doc.closeOpen() // the parts share its bytes: give them no room to spare
	}
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
func (it *item) tryMerge(d *Doc, right *item) bool {
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
		it.mergeContent(d, right) {
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
	tx.ds.addDeleted(it.client(), it.clock(), it.len())
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

// appendTo appends the encoding of the struct from offset on (offset > 0 writes the tail
// whose origin is the unit before it). Contents other than strings and deleted content are
// written with ce (which it may allocate).
func (it *item) appendTo(b []byte, offset uint64, ce **lib0.Encoder) []byte {
	if it.isGC() {
		return lib0.AppendVarUint(append(b, refGC), it.len()-offset)
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
	b = append(b, info)
	if hasOrigin {
		b = lib0.AppendVarUint(lib0.AppendVarUint(b, origin.Client), origin.Clock)
	}
	if it.hasRight() {
		ro := it.rightOrigin()
		b = lib0.AppendVarUint(lib0.AppendVarUint(b, ro.Client), ro.Clock)
	}
	if !hasOrigin && !it.hasRight() {
		p := it.parent
		if p.item == nil {
			b = lib0.AppendVarString(append(b, 1), p.rootName)
		} else {
			b = lib0.AppendVarUint(lib0.AppendVarUint(append(b, 0), p.item.client()), p.item.clock())
		}
		if it.hasSub() {
			b = lib0.AppendVarString(b, it.parentSub())
		}
	}
	return it.appendContent(b, offset, ce)
}
