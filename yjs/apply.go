package yjs

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/nomicore/nomicore/lib0"
)

// structRef is a struct of an update waiting to be integrated: its item (id, length,
// origins, parentSub and content; a Skip struct is a GC struct whose ref is refSkip), and the
// parent the update names for it, if any.
type structRef struct {
	it    *item
	named *namedParent
}

// namedParent is the parent an update names for a struct without origins: a root type by
// key (parentRoot), or the type held by the item with id (parentItem).
type namedParent struct {
	kind uint8
	key  string
	id   ID
}

func (ref *structRef) skip() bool { return ref.it.ref == refSkip }

// parent is parentNone (the parent of a neighbour), parentRoot or parentItem.
func (ref *structRef) parent() uint8 {
	if ref.named == nil {
		return parentNone
	}
	return ref.named.kind
}

func (ref *structRef) parentKey() string { return ref.named.key }
func (ref *structRef) parentID() ID      { return ref.named.id }

// refList is the structs of one client block of an update, consumed from i on.
type refList struct {
	refs []structRef
	i    int
}

// decodedUpdate is a fully validated v1 update.
type decodedUpdate struct {
	clients map[uint64]*refList
	dels    []delBlock // the delete set in reading order
}

type delBlock struct {
	client uint64
	ranges []delRange
}

// decodeUpdate reads and validates a whole v1 update without touching any document. The
// strings of the update are copied into one buffer that their items share.
func decodeUpdate(b []byte) (*decodedUpdate, error) {
	d := lib0.NewDecoder(b)
	u := &decodedUpdate{clients: make(map[uint64]*refList)}
	r := newStructReader(d, true)
	r.bare = true
	var s rawStruct
	hasStrings := false
	for r.nextBlock() {
		l := &refList{refs: make([]structRef, 0, r.structsLeft)}
		u.clients[r.client] = l
		for r.next(&s) {
			l.refs = append(l.refs, refFromRaw(&s, b))
			hasStrings = hasStrings || s.str != nil
		}
	}
	if d.Err() != nil {
		return nil, decodeErr("update", d.Err())
	}
	n := d.ReadCount(1<<31-1, 2)
	for i := 0; i < n && d.Err() == nil; i++ {
		blk := delBlock{client: d.ReadVarUint()}
		m := d.ReadCount(1<<31-1, 2)
		blk.ranges = make([]delRange, 0, m)
		for j := 0; j < m && d.Err() == nil; j++ {
			clock, length := readDelRange(d)
			blk.ranges = append(blk.ranges, delRange{clock, length})
		}
		u.dels = append(u.dels, blk)
	}
	if err := d.Finish(); err != nil {
		return nil, decodeErr("update", err)
	}
	if hasStrings {
		u.copyStrings()
	}
	return u, nil
}

// copyStrings gives the string items of the update, whose data is in the update's bytes
// (as it is encoded there: text beyond ASCII after its byte count), data of their own: one
// buffer holds them all.
func (u *decodedUpdate) copyStrings() {
	size := 0
	for _, l := range u.clients {
		for _, ref := range l.refs {
			if ref.it.ref == refString {
				hdr, n := stringDataLen(ref.it)
				size += hdr + n
			}
		}
	}
	buf := make([]byte, 0, size)
	for _, l := range u.clients {
		for _, ref := range l.refs {
			if it := ref.it; it.ref == refString {
				hdr, n := stringDataLen(it)
				at := len(buf)
				buf = append(buf, unsafe.Slice((*byte)(it.cdata()), hdr+n)...)
				it.setCData(unsafe.Pointer(&buf[at]))
			}
		}
	}
}

// refFromRaw makes the struct to integrate from a struct decoded from update. A string item
// keeps its data in the update until decodeUpdate copies its strings.
func refFromRaw(s *rawStruct, update []byte) structRef {
	it := &item{}
	it.setID(s.id)
	ref := structRef{it: it}
	switch s.kind {
	case structGC:
		it.flags |= flagGC | flagDeleted
		it.setLen(s.length)
		return ref
	case structSkip:
		it.flags |= flagGC | flagDeleted
		it.ref = refSkip
		it.setLen(s.length)
		return ref
	}
	switch {
	case s.content != nil:
		it.setContent(s.content)
	case s.ref == refString:
		// the data stays in the update until copyStrings
		it.ref = refString
		it.flags |= flagCountable
		it.setLen(s.length)
		if uint64(len(s.str)) == s.length {
			it.setCData(unsafe.Pointer(unsafe.SliceData(s.str)))
		} else {
			it.setCData(unsafe.Pointer(&update[s.strAt]))
			it.flags |= flagStrHeader
		}
	default: // deleted content
		it.ref = refDeleted
		it.setLen(s.length)
	}
	if s.hasOrigin {
		it.setOrigin(s.origin)
	}
	if s.hasRight {
		it.setRightOrigin(s.rightOrigin)
	}
	if s.hasSub {
		it.setParentSub(s.sub, true)
	}
	if s.parent != parentNone {
		ref.named = &namedParent{kind: s.parent, key: s.parentKey, id: s.parentID}
	}
	return ref
}

// attachRoots resolves the root parents of an update's structs, creating the roots (JS
// creates them while reading, even for structs that end up pending).
func (d *Doc) attachRoots(u *decodedUpdate) {
	for _, c := range sortedKeys(u.clients) {
		for i := range u.clients[c].refs {
			if ref := &u.clients[c].refs[i]; ref.parent() == parentRoot {
				ref.it.parent = d.root(ref.parentKey())
			}
		}
	}
}

// ApplyUpdate integrates a v1 update into doc within a transaction with the given origin.
// Structs whose dependencies are missing wait as pending and are integrated as soon as the
// dependencies arrive. A malformed update returns a *DecodeError and changes nothing; a
// broken invariant returns an *InternalError (the document must then be discarded).
func ApplyUpdate(doc *Doc, update []byte, origin any) (err error) {
	u, err := decodeUpdate(update)
	if err != nil {
		return err
	}
	return doc.applyWhole(u, origin)
}

// ParsedUpdate is a v1 update decoded and validated once (ParseUpdate), so that it can be
// inspected (InspectParsed) and then applied (ApplyParsed) without decoding it again. Applying
// it consumes it: it is applied at most once.
type ParsedUpdate struct {
	u       *decodedUpdate
	applied bool
}

// ParseUpdate decodes and validates update (a malformed one returns a *DecodeError). The
// parsed update does not refer to update's bytes.
func ParseUpdate(update []byte) (*ParsedUpdate, error) {
	u, err := decodeUpdate(update)
	if err != nil {
		return nil, err
	}
	return &ParsedUpdate{u: u}, nil
}

// ErrParsedApplied: a ParsedUpdate was applied already (ApplyParsed).
var ErrParsedApplied = errors.New("yjs: parsed update applied already")

// ApplyParsed is ApplyUpdate of a parsed update; a second apply of p is ErrParsedApplied and
// changes nothing.
func ApplyParsed(doc *Doc, p *ParsedUpdate, origin any) error {
	if p.applied {
		return ErrParsedApplied
	}
	p.applied = true
	return doc.applyWhole(p.u, origin)
}

// applyWhole integrates a decoded update in a transaction of its own (ApplyUpdate).
func (d *Doc) applyWhole(u *decodedUpdate, origin any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &InternalError{Op: "ApplyUpdate", Cause: r}
		}
	}()
	d.transact(origin, false, func(tx *Transaction) {
		defer func() {
			if r := recover(); r != nil {
				tx.broken = true // nothing of a broken integration is cleaned up or emitted
				panic(r)
			}
		}()
		d.attachRoots(u)
		d.applyDecoded(tx, u, false)
	})
	return nil
}

// applyDecoded integrates a validated update in tx (JS readUpdateV2). pending says the
// update holds structs that waited as pending.
func (d *Doc) applyDecoded(tx *Transaction, u *decodedUpdate, pending bool) {
	tx.local = false
	if pending {
		before := tx.changes
		defer func() {
			if tx.changes > before {
				tx.unlocked = true
			}
		}()
	}
	rest, missing := d.integrateStructs(tx, u.clients)
	retry := false
	if p := d.pending; p != nil {
		for client, clock := range p.missing {
			if clock < d.store.state(client) {
				retry = true
				break
			}
		}
		if rest != nil {
			for client, clock := range missing {
				if m, ok := p.missing[client]; !ok || m > clock {
					p.missing[client] = clock
				}
			}
			merged, err := MergeUpdates([][]byte{p.update, encodeRefs(rest)})
			if err != nil {
				panic(fmt.Sprintf("yjs: merging pending structs: %v", err))
			}
			p.update = merged
		}
	} else if rest != nil {
		d.pending = &pendingStructs{missing: missing, update: encodeRefs(rest)}
	}
	dsRest := d.applyDeleteBlocks(tx, u.dels)
	if pend := d.pendingDels; pend != nil && !d.pendingDelsApply() {
		// nothing of the pending deletions can apply yet: re-applying them (as JS does)
		// would give them back unchanged
		if dsRest != nil {
			m := mergeDeleteSets([]deleteSet{*dsRest, *pend})
			d.pendingDels = &m
		}
	} else if pend != nil {
		blocks := make([]delBlock, 0, len(pend.entries))
		for _, en := range pend.byClientDesc() {
			blocks = append(blocks, delBlock{client: en.client, ranges: en.ranges})
		}
		before := tx.changes
		dsRest2 := d.applyDeleteBlocks(tx, blocks)
		if tx.changes > before {
			tx.unlocked = true
		}
		switch {
		case dsRest != nil && dsRest2 != nil:
			m := mergeDeleteSets([]deleteSet{*dsRest, *dsRest2})
			d.pendingDels = &m
		case dsRest != nil:
			d.pendingDels = dsRest
		default:
			d.pendingDels = dsRest2
		}
	} else {
		d.pendingDels = dsRest
	}
	if d.pendingDels != nil {
		d.pendingDels.normalize()
	}
	if retry {
		update := d.pending.update
		d.pending = nil
		pu, err := decodeUpdate(update)
		if err != nil {
			panic(fmt.Sprintf("yjs: pending structs do not decode: %v", err))
		}
		d.attachRoots(pu)
		d.applyDecoded(tx, pu, true)
	}
}

// pendingDelsApply reports whether some pending deletion concerns a clock the document has
// now (the ranges are normalized: the first of a client is its lowest).
func (d *Doc) pendingDelsApply() bool {
	for _, en := range d.pendingDels.entries {
		if len(en.ranges) > 0 && en.ranges[0].clock < d.store.state(en.client) {
			return true
		}
	}
	return false
}

// integrateStructs integrates the structs of an update (JS integrateStructs): clients from
// the highest id down; a struct whose dependency is missing is stacked while the structs
// it depends on are integrated first; structs that cannot be integrated are returned as the
// rest, with the lowest clock per client whose arrival is worth a retry.
func (d *Doc) integrateStructs(tx *Transaction, clients map[uint64]*refList) (rest map[uint64][]structRef, missingSV StateVector) {
	ids := sortedKeys(clients)
	if len(ids) == 0 {
		return nil, nil
	}
	next := func() *refList {
		for len(ids) > 0 {
			t := clients[ids[len(ids)-1]]
			if t != nil && t.i < len(t.refs) {
				return t
			}
			ids = ids[:len(ids)-1]
		}
		return nil
	}
	cur := next()
	if cur == nil {
		return nil, nil
	}
	store := &d.store
	var stack []*structRef
	updateMissing := func(client, clock uint64) {
		if missingSV == nil {
			missingSV = StateVector{}
		}
		if m, ok := missingSV[client]; !ok || m > clock {
			missingSV[client] = clock
		}
	}
	addStackToRest := func() {
		if rest == nil {
			rest = map[uint64][]structRef{}
		}
		for _, ref := range stack {
			client := ref.it.client()
			if l, ok := clients[client]; ok {
				// the struct on the stack was the last one taken from its list
				l.i--
				rest[client] = l.refs[l.i:]
				delete(clients, client)
				l.i = 0
				l.refs = nil
			} else {
				rest[client] = []structRef{*ref}
			}
			ids = slices.DeleteFunc(ids, func(c uint64) bool { return c == client })
		}
		clear(stack)
		stack = stack[:0]
	}
	head := &cur.refs[cur.i]
	cur.i++
	for {
		if !head.skip() {
			it := head.it
			local := store.state(it.client())
			if local < it.clock() {
				// an earlier struct of the same client is missing
				stack = append(stack, head)
				updateMissing(it.client(), it.clock()-1)
				addStackToRest()
			} else if missing, ok := d.missingDependency(tx, head); ok {
				stack = append(stack, head)
				l := clients[missing]
				if l == nil || l.i == len(l.refs) {
					// the dependency is in no update we have: wait for it
					updateMissing(missing, store.state(missing))
					addStackToRest()
				} else {
					head = &l.refs[l.i]
					l.i++
					continue
				}
			} else if offset := local - it.clock(); offset == 0 || offset < it.len() {
				it.integrate(tx, offset)
			}
		}
		switch {
		case len(stack) > 0:
			head = stack[len(stack)-1]
			stack[len(stack)-1] = nil
			stack = stack[:len(stack)-1]
		case cur != nil && cur.i < len(cur.refs):
			head = &cur.refs[cur.i]
			cur.i++
		default:
			cur = next()
			if cur == nil {
				return rest, missingSV
			}
			head = &cur.refs[cur.i]
			cur.i++
		}
	}
}

// missingDependency returns the client of a missing origin, right origin or parent of ref;
// when nothing is missing it resolves them (left, right and parent of the item) and
// returns ok = false (JS Item.getMissing).
func (d *Doc) missingDependency(tx *Transaction, ref *structRef) (uint64, bool) {
	it := ref.it
	if it.isGC() {
		return 0, false
	}
	store := &d.store
	client := it.client()
	if it.hasOrigin() {
		if o := it.origin(); o.Client != client && o.Clock >= store.state(o.Client) {
			return o.Client, true
		}
	}
	if it.hasRight() {
		if r := it.rightOrigin(); r.Client != client && r.Clock >= store.state(r.Client) {
			return r.Client, true
		}
	}
	if ref.parent() == parentItem {
		if p := ref.parentID(); p.Client != client && p.Clock >= store.state(p.Client) {
			return p.Client, true
		}
	}
	if it.hasOrigin() {
		it.left = store.itemCleanEnd(tx, it.origin())
		it.setOrigin(it.left.lastID())
	}
	if it.hasRight() {
		it.right = store.itemCleanStart(tx, it.rightOrigin())
		it.setRightOrigin(it.right.id())
	}
	switch {
	case (it.left != nil && it.left.isGC()) || (it.right != nil && it.right.isGC()):
		it.parent = nil
	case ref.parent() == parentNone:
		// the parent (and key) of a neighbour
		src := it.left
		if src == nil {
			src = it.right
		}
		if src != nil {
			it.parent = src.parent
			it.setParentSub(src.parentSub(), src.hasSub())
		}
	case ref.parent() == parentItem:
		p := store.find(ref.parentID())
		it.parent = nil
		if !p.isGC() {
			it.parent = p.childType()
		}
	}
	return 0, false
}

// applyDeleteBlocks applies a delete set (JS readAndApplyDeleteSet) and returns the part
// that concerns structs not received yet, or nil.
func (d *Doc) applyDeleteBlocks(tx *Transaction, blocks []delBlock) *deleteSet {
	var unapplied *deleteSet
	addUnapplied := func(client, clock, length uint64) {
		if unapplied == nil {
			unapplied = &deleteSet{}
		}
		unapplied.add(client, clock, length)
	}
	for _, b := range blocks {
		l := d.store.clients[b.client]
		state := uint64(0)
		if l != nil {
			state = l.state()
		}
		for _, r := range b.ranges {
			end := r.clock + r.len
			if r.clock >= state {
				addUnapplied(b.client, r.clock, r.len)
				continue
			}
			if state < end {
				addUnapplied(b.client, state, end-state)
			}
			p := l.find(r.clock)
			if it := l.at(p); !it.deleted() && it.clock() < r.clock {
				p = l.insertAfter(p, splitItem(tx, it, r.clock-it.clock()))
			}
			// The walk holds p across deletions only: deleting changes no list. A split
			// inserts into the list, which may split p's chunk and move the struct at p; the
			// only split inside the walk is the one at end, after which nothing is left of
			// the range, so p is never used after it.
			for {
				it := l.at(p)
				if it.clock() >= end {
					break
				}
				if !it.deleted() {
					if end < it.endClock() {
						l.insertAfter(p, splitItem(tx, it, end-it.clock()))
						it.delete(tx)
						if !d.olderDeleteWalk {
							break
						}
						// ReplayAsOlderVersions: go on from p, which may be stale
					} else {
						it.delete(tx)
					}
				}
				np, ok := l.next(p)
				if !ok {
					break
				}
				p = np
			}
		}
	}
	return unapplied
}

// encodeRefs writes structs that could not be integrated as an update (JS writes the rest
// structs with writeClientsStructs and an empty delete set).
func encodeRefs(rest map[uint64][]structRef) []byte {
	e := lib0.NewEncoder(64)
	clients := sortedKeys(rest)
	e.WriteVarUint(uint64(len(clients)))
	for i := len(clients) - 1; i >= 0; i-- {
		refs := rest[clients[i]]
		e.WriteVarUint(uint64(len(refs)))
		e.WriteVarUint(clients[i])
		e.WriteVarUint(refs[0].it.clock())
		for i := range refs {
			refs[i].write(e)
		}
	}
	e.WriteVarUint(0)
	return e.Bytes()
}

// write encodes a struct that was decoded but not integrated, as it was read.
func (ref *structRef) write(e *lib0.Encoder) {
	it := ref.it
	s := rawStruct{id: it.id(), length: it.len()}
	switch {
	case ref.skip():
		s.kind = structSkip
	case it.isGC():
		s.kind = structGC
	default:
		s.kind = structItem
		s.hasOrigin, s.hasRight, s.hasSub = it.hasOrigin(), it.hasRight(), it.hasSub()
		if s.hasOrigin {
			s.origin = it.origin()
		}
		if s.hasRight {
			s.rightOrigin = it.rightOrigin()
		}
		s.parent = ref.parent()
		if ref.named != nil {
			s.parentKey, s.parentID = ref.named.key, ref.named.id
		}
		s.sub = it.parentSub()
		s.content = it.detached()
	}
	s.write(e, 0)
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
