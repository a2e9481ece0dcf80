package yjs

// Transaction groups changes to a document. Changes made inside Doc.Transact share one
// transaction; when the outermost call returns, the transaction is cleaned up (deleted
// content garbage-collected, structs merged) and its update is handed to the OnUpdate
// handlers.
type Transaction struct {
	doc    *Doc
	origin any
	local  bool

	before       []clientClock  // clients with new structs here, with their earlier state
	beforeIndex  map[uint64]int // client → index in before, once there are many
	ds           deleteSet      // deletions made in this transaction
	mergeStructs []*item        // split parts to try to merge back afterwards
	changed      []*Type        // types changed that existed before (JS transaction.changed)

	changes  int  // structs integrated and items deleted so far
	broken   bool // an invariant broke inside: no cleanup, no update
	unlocked bool // pending structs or deletions took effect (see UpdateEvent.Unlocked)

	// markerOwner is the type whose local sequence operation is running: changes to it
	// keep its search markers up to date; a change to any other type clears that type's.
	markerOwner *Type

	subdocsAdded, subdocsRemoved, subdocsLoaded []*Doc
}

// Origin returns the origin given to Doc.Transact or ApplyUpdate.
func (tx *Transaction) Origin() any { return tx.origin }

// Local reports whether the transaction was started by a local change (not ApplyUpdate).
func (tx *Transaction) Local() bool { return tx.local }

// Doc returns the document.
func (tx *Transaction) Doc() *Doc { return tx.doc }

func (tx *Transaction) reset(d *Doc, origin any, local bool) {
	tx.doc, tx.origin, tx.local = d, origin, local
	tx.before = tx.before[:0]
	tx.beforeIndex = nil
	clear(tx.changed)
	tx.changed = tx.changed[:0]
	tx.ds.clear()
	clear(tx.mergeStructs)
	tx.mergeStructs = tx.mergeStructs[:0]
	tx.markerOwner = nil
	tx.changes, tx.unlocked, tx.broken = 0, false, false
	tx.subdocsAdded, tx.subdocsRemoved, tx.subdocsLoaded = nil, nil, nil
}

// clientClock is a client and a clock.
type clientClock struct{ client, clock uint64 }

func (tx *Transaction) beforeAt(client uint64) int {
	if tx.beforeIndex != nil {
		if i, ok := tx.beforeIndex[client]; ok {
			return i
		}
		return -1
	}
	for i := range tx.before {
		if tx.before[i].client == client {
			return i
		}
	}
	return -1
}

// beforeState returns the state of client when the transaction started.
func (tx *Transaction) beforeState(client uint64) uint64 {
	if i := tx.beforeAt(client); i >= 0 {
		return tx.before[i].clock
	}
	return tx.doc.store.state(client)
}

// addStruct appends a new struct to the store, remembering the client's earlier state.
func (tx *Transaction) addStruct(it *item) {
	c := it.client()
	if n := len(tx.before); (n == 0 || tx.before[n-1].client != c) && tx.beforeAt(c) < 0 {
		tx.before = append(tx.before, clientClock{c, tx.doc.store.state(c)})
		if tx.beforeIndex != nil {
			tx.beforeIndex[c] = len(tx.before) - 1
		} else if len(tx.before) > 8 {
			tx.beforeIndex = make(map[uint64]int, 32)
			for i, b := range tx.before {
				tx.beforeIndex[b.client] = i
			}
		}
	}
	tx.doc.store.add(it)
	tx.changes++
}

// addChangedType records that t changed, when t existed before this transaction.
func (tx *Transaction) addChangedType(t *Type, sub string, hasSub bool) {
	it := t.item
	if it == nil || (it.clock() < tx.beforeState(it.client()) && !it.deleted()) {
		if !t.changed {
			t.changed = true
			tx.changed = append(tx.changed, t)
		}
	}
}

// unchanged forgets that t changed (it is being deleted).
func (tx *Transaction) unchanged(t *Type) {
	if !t.changed {
		return
	}
	t.changed = false
	for i, c := range tx.changed {
		if c == t {
			tx.changed = append(tx.changed[:i], tx.changed[i+1:]...)
			return
		}
	}
}

func (tx *Transaction) subdocAdded(d *Doc) {
	tx.subdocsAdded = append(tx.subdocsAdded, d)
	if d.shouldLoad {
		tx.subdocsLoaded = append(tx.subdocsLoaded, d)
	}
}

func (tx *Transaction) subdocRemoved(d *Doc) {
	for i, a := range tx.subdocsAdded {
		if a == d {
			tx.subdocsAdded = append(tx.subdocsAdded[:i], tx.subdocsAdded[i+1:]...)
			return
		}
	}
	tx.subdocsRemoved = append(tx.subdocsRemoved, d)
}

// addedStructs reports whether the transaction added any struct.
func (tx *Transaction) addedStructs() bool {
	for _, b := range tx.before {
		if tx.doc.store.state(b.client) != b.clock {
			return true
		}
	}
	return false
}

// Transact runs fn in a transaction with the given origin. A call inside an open
// transaction joins it. fn must not keep tx after returning. If fn panics, the changes it
// made are still cleaned up and handed to the OnUpdate handlers (as JS does when the
// callback throws), then the panic continues.
func (d *Doc) Transact(origin any, fn func(tx *Transaction)) {
	d.transact(origin, true, fn)
}

// transact runs fn in the open transaction or a new one, and cleans up the new one (and any
// started during its cleanup) when fn returns.
func (d *Doc) transact(origin any, local bool, fn func(tx *Transaction)) {
	if d.tx != nil {
		fn(d.tx)
		return
	}
	tx := d.newTransaction(origin, local)
	d.tx = tx
	d.cleanups = append(d.cleanups, tx)
	defer func() {
		r := recover()
		d.tx = nil
		if d.cleanups[0] == tx {
			if r == nil || !tx.broken {
				// The outermost transaction ended: clean it up and every transaction
				// started meanwhile, one after the other.
				for i := 0; i < len(d.cleanups); i++ {
					d.cleanupTransaction(d.cleanups[i])
				}
			}
			for _, t := range d.cleanups {
				d.releaseTransaction(t)
			}
			clear(d.cleanups)
			d.cleanups = d.cleanups[:0]
		}
		if r != nil {
			panic(r)
		}
	}()
	fn(tx)
}

func (d *Doc) newTransaction(origin any, local bool) *Transaction {
	tx := d.spareTx
	d.spareTx = nil
	if tx == nil {
		tx = &Transaction{}
	}
	tx.reset(d, origin, local)
	return tx
}

func (d *Doc) releaseTransaction(tx *Transaction) {
	tx.origin = nil
	tx.trim()
	d.spareTx = tx
}

// spareMax is the most entries a spare transaction keeps room for in each of its lists: a
// large transaction (loading a document) must not leave its lists to every idle document.
const spareMax = 256

// trim drops the lists of tx that grew beyond spareMax.
func (tx *Transaction) trim() {
	if cap(tx.before) > spareMax {
		tx.before = nil
	}
	if cap(tx.mergeStructs) > spareMax {
		tx.mergeStructs = nil
	}
	if cap(tx.changed) > spareMax {
		tx.changed = nil
	}
	n := cap(tx.ds.entries)
	for _, en := range tx.ds.entries[:n] {
		n += cap(en.ranges)
	}
	if n > spareMax {
		tx.ds = deleteSet{}
	}
}

// cleanupTransaction is the end of a transaction: formatting cleanup, garbage collection,
// struct merging, client-id collision check, the update event and subdocument bookkeeping.
func (d *Doc) cleanupTransaction(tx *Transaction) {
	tx.ds.normalize()
	if !tx.local {
		needCleanup := false
		for _, t := range tx.changed {
			if (t.item == nil || !t.item.deleted()) && t.kind.isText() && t.hasFormatting {
				needCleanup = true
			}
			t.clearMarkers()
		}
		if needCleanup {
			d.cleanupFormattingAfter(tx)
		}
	}
	if d.gc {
		d.gcDeleteSet(&tx.ds)
	}
	d.mergeDeleteSet(&tx.ds)
	for _, t := range tx.changed {
		t.changed = false
	}
	// The merge loops below hold list positions across mergeWithLefts, which removes structs
	// only after the position it returns: every position at or before that one (first
	// included while the loop goes on, and what prev returns) stays valid. Nothing in them
	// inserts.
	for _, b := range tx.before {
		before := b.clock
		l := d.store.clients[b.client]
		if l.state() == before {
			continue
		}
		first := spos{}
		if before > 0 {
			first = l.find(before)
		}
		if l.isFirst(first) {
			first, _ = l.next(first)
		}
		for p := l.lastPos(); !posLess(p, first); {
			q := d.mergeWithLefts(l, p)
			var ok bool
			if p, ok = l.prev(q); !ok {
				break
			}
		}
	}
	for i := len(tx.mergeStructs) - 1; i >= 0; i-- {
		id := tx.mergeStructs[i].id()
		l := d.store.clients[id.Client]
		p := l.find(id.Clock)
		if np, ok := l.next(p); ok {
			q := d.mergeWithLefts(l, np)
			if posLess(q, p) {
				continue // both merged already (p may be stale now: not used)
			}
			// q is p or np: the removals were after p
		}
		if !l.isFirst(p) {
			d.mergeWithLefts(l, p)
		}
	}
	if d.text.compactDue() {
		d.compactStrings()
	}
	if !tx.local {
		if i := tx.beforeAt(d.clientID); i >= 0 && d.store.state(d.clientID) != tx.before[i].clock {
			// Another client is using our id: take a new one.
			d.clientID = d.newClientID()
		}
	}
	if len(d.updateHandlers) > 0 && (!tx.ds.empty() || tx.addedStructs()) {
		update := d.encodeTransactionUpdate(tx)
		d.emitUpdate(update, tx)
	}
	if len(tx.subdocsAdded) > 0 || len(tx.subdocsRemoved) > 0 || len(tx.subdocsLoaded) > 0 {
		for _, s := range tx.subdocsAdded {
			s.clientID = d.clientID
			d.subdocs[s] = struct{}{}
		}
		for _, s := range tx.subdocsRemoved {
			delete(d.subdocs, s)
		}
	}
}

func posLess(a, b spos) bool { return a.c < b.c || (a.c == b.c && a.i < b.i) }

// mergeWithLefts merges the struct at p into its left neighbours as far as possible and
// returns the position of the struct that absorbed it (p when nothing merged). It removes the
// absorbed structs, which all lie after the returned position: positions up to it stay valid,
// later ones do not. Each removal is at next(cur) of a cur that no removal moves (a removal
// after cur shifts nothing before it, and the chunk it may drop is after cur's).
func (d *Doc) mergeWithLefts(l *structList, p spos) spos {
	right := l.at(p)
	cur := p
	merged := 0
	for {
		lp, ok := l.prev(cur)
		if !ok {
			break
		}
		left := l.at(lp)
		if left.deleted() != right.deleted() || left.isGC() != right.isGC() || !left.tryMerge(d, right) {
			break
		}
		if !right.isGC() && right.hasSub() && right.parent.entries[right.parentSub()] == right {
			right.parent.entries[right.parentSub()] = left
		}
		merged++
		right = left
		cur = lp
	}
	for ; merged > 0; merged-- {
		np, _ := l.next(cur)
		l.remove(np)
	}
	return cur
}

// gcDeleteSet replaces the content of the deleted items in ds. The walk over each range keeps
// its list position while it collects: gc changes structs in place (content, flags and
// links), never a list, so the position stays valid.
func (d *Doc) gcDeleteSet(ds *deleteSet) {
	for _, en := range ds.entries {
		l := d.store.clients[en.client]
		for i := len(en.ranges) - 1; i >= 0; i-- {
			r := en.ranges[i]
			end := r.clock + r.len
			l.each(l.find(r.clock), func(it *item) bool {
				if it.clock() >= end {
					return false
				}
				if !it.isGC() && it.deleted() && !it.keep() {
					if it.ref == refString {
						d.text.garbage += len(it.str())
					}
					it.gc(false)
				}
				return true
			})
		}
	}
}

// mergeDeleteSet merges the structs around the ranges of ds. Each range is found afresh, and
// the walk goes left from what mergeWithLefts returns, which its removals do not move.
func (d *Doc) mergeDeleteSet(ds *deleteSet) {
	for _, en := range ds.entries {
		l := d.store.clients[en.client]
		for i := len(en.ranges) - 1; i >= 0; i-- {
			r := en.ranges[i]
			p := l.find(r.clock + r.len - 1)
			if np, ok := l.next(p); ok {
				p = np
			}
			for !l.isFirst(p) && l.at(p).clock() >= r.clock {
				q := d.mergeWithLefts(l, p)
				var ok bool
				if p, ok = l.prev(q); !ok {
					break
				}
			}
		}
	}
}

// encodeTransactionUpdate writes the v1 update of tx: the structs it added (from each
// client's earlier state, after merging) and its delete set. The result is a fresh slice.
func (d *Doc) encodeTransactionUpdate(tx *Transaction) []byte {
	e := &d.scratch
	e.Reset()
	starts := d.startsScratch[:0]
	for _, b := range tx.before {
		if d.store.state(b.client) > b.clock {
			starts = append(starts, b)
		}
	}
	sortStarts(starts)
	d.writeStructsFrom(e, starts)
	d.startsScratch = starts[:0]
	tx.ds.write(e)
	return append(make([]byte, 0, e.Len()), e.Bytes()...)
}
