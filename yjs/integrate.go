package yjs

// integrate places the item in its parent with the YATA rules and adds it to the store.
// offset > 0 integrates only the units from offset on (the rest is known already).
func (it *item) integrate(tx *Transaction, offset uint64) {
	store := &tx.doc.store
	if it.isGC() {
		it.setClock(it.clock() + offset)
		it.setLen(it.len() - offset)
		tx.addStruct(it)
		return
	}
	if offset > 0 {
		it.setClock(it.clock() + offset)
		it.left = store.itemCleanEnd(tx, ID{it.client(), it.clock() - 1})
		it.setOrigin(it.left.lastID())
		it.cutContent(offset)
	}
	p := it.parent
	if p == nil {
		// The parent is gone (garbage-collected): keep only the clock range.
		if it.ref == refString {
			tx.doc.text.garbage += len(it.str())
		}
		it.makeGC()
		tx.addStruct(it)
		return
	}
	if (it.left == nil && (it.right == nil || it.right.left != nil)) || (it.left != nil && it.left.right != it.right) {
		it.left = it.resolveConflicts(tx)
	}
	// link between left and right
	if it.left != nil {
		it.right = it.left.right
		it.left.right = it
	} else {
		var r *item
		if it.hasSub() {
			r = p.entries[it.parentSub()]
			for r != nil && r.left != nil {
				r = r.left
			}
		} else {
			r = p.start
			p.start = it
		}
		it.right = r
	}
	if it.hasSub() {
		// the values of one key share its string
		for _, n := range [2]*item{it.left, it.right} {
			if n != nil && n.hasSub() && n.parentSub() == it.parentSub() {
				it.setParentSub(n.parentSub(), true)
				break
			}
		}
	}
	if it.right != nil {
		it.right.left = it
	} else if it.hasSub() {
		// the newest value of its key: the previous value is overwritten
		p.entries[it.parentSub()] = it
		if it.left != nil {
			it.left.delete(tx)
		}
	}
	if !it.hasSub() && it.countable() && !it.deleted() {
		p.length += int(it.len())
		if len(p.markers) > 0 && p != tx.markerOwner {
			p.clearMarkers()
		}
	}
	tx.addStruct(it)
	switch it.contentRef() {
	case refString:
		tx.doc.text.added += int(it.len())
	case refType:
		it.childType().integrate(tx, it)
	case refDoc:
		doc := it.subdoc()
		doc.item = it
		if doc.random == nil {
			doc.random = tx.doc.random
		}
		tx.subdocAdded(doc)
	case refFormat:
		p.hasFormatting = true
	case refDeleted:
		tx.ds.addDeleted(it.client(), it.clock(), it.len())
		it.markDeleted()
	}
	tx.addChangedType(p, it.parentSub(), it.hasSub())
	if (p.item != nil && p.item.deleted()) || (it.hasSub() && it.right != nil) {
		// the parent is deleted, or a newer value of the key exists already
		it.delete(tx)
	}
}

// resolveConflicts finds the item after which it goes, scanning the items between its left
// neighbour and its right origin (YATA):
//
//  1. an item with the same origin goes first when its client id is lower; with the same
//     right origin too, it goes after us (the scan stops);
//  2. an item whose origin lies within the scanned items goes first unless its origin is
//     one of the items still in conflict with us;
//  3. any other item ends the scan.
func (it *item) resolveConflicts(tx *Transaction) *item {
	p := it.parent
	left := it.left
	var o *item
	switch {
	case left != nil:
		o = left.right
	case it.hasSub():
		o = p.entries[it.parentSub()]
		for o != nil && o.left != nil {
			o = o.left
		}
	default:
		o = p.start
	}
	s := &tx.doc.yata
	s.reset()
	defer s.reset()
	store := &tx.doc.store
	for o != nil && o != it.right {
		s.add(o)
		if sameOpt(it.origin(), it.hasOrigin(), o.origin(), o.hasOrigin()) {
			if o.client() < it.client() {
				left = o
				s.clearConflicting()
			} else if sameOpt(it.rightOrigin(), it.hasRight(), o.rightOrigin(), o.hasRight()) {
				break
			}
		} else if o.hasOrigin() {
			oo := store.find(o.origin())
			i := s.index(oo)
			if i < 0 {
				break
			}
			if i < s.conflictStart {
				left = o
				s.clearConflicting()
			}
		} else {
			break
		}
		o = o.right
	}
	return left
}

// yataScratch holds the items scanned by one conflict resolution: all of them are "before
// origin" candidates; those from conflictStart on are still in conflict.
type yataScratch struct {
	items         []*item
	pos           map[*item]int // built when items grow beyond a handful
	conflictStart int
}

func (s *yataScratch) reset() {
	clear(s.items)
	s.items = s.items[:0]
	if s.pos != nil {
		clear(s.pos)
	}
	s.conflictStart = 0
}

func (s *yataScratch) add(o *item) {
	s.items = append(s.items, o)
	if s.pos != nil {
		s.pos[o] = len(s.items) - 1
	} else if len(s.items) > 16 {
		s.pos = make(map[*item]int, 64)
		for i, x := range s.items {
			s.pos[x] = i
		}
	}
}

func (s *yataScratch) clearConflicting() { s.conflictStart = len(s.items) }

func (s *yataScratch) index(o *item) int {
	if len(s.items) > 16 && s.pos != nil {
		if i, ok := s.pos[o]; ok {
			return i
		}
		return -1
	}
	for i, x := range s.items {
		if x == o {
			return i
		}
	}
	return -1
}
