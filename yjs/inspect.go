package yjs

import "slices"

// RootEffect is what an update would do to one root type of a document, found without
// applying the update (see InspectUpdate).
type RootEffect struct {
	// Inserts: some struct of the update would be integrated under the root, at any depth
	// (including a value that loses to a concurrent one, or deleted content).
	Inserts bool
	// Deletes: a delete range of the update hits live content under the root.
	Deletes bool
	// Waiting lists the clients (sorted) whose structs the update depends on but the
	// document lacks: structs that depend on them, and deletions of their clocks, would wait
	// as pending and take effect when those structs arrive, in that later transaction.
	Waiting []uint64
}

// InspectUpdate reports what update would do to the root named root of doc, read-only: it
// decodes and validates the update (a malformed one returns a *DecodeError) and resolves
// the parent of every struct through the update itself and the document's store, as
// integration would (a struct with an origin takes its origin's parent; one next to a
// garbage-collected struct becomes a GC struct and is placed nowhere).
//
// It is built for the registry's protected-field check (docs/protocol.md#protected-apply):
// refuse an update whose
// effect on the root "meta" has Inserts or Deletes. That refuses every update that would
// change a meta value (and some that would not, such as rewriting a key with an equal
// value, or a concurrent value that loses). Its cost is proportional to the update (each
// struct is resolved by binary search and a walk up to its root) plus the live content
// under the root (small for meta), never to the document.
//
// Waiting names what cannot be placed yet. A struct waiting for a missing struct lands
// where that struct is, so it can only reach the root if the missing struct is placed
// there; for meta, written only by the hub's registry, that means structs of the
// registry's own client. A check should therefore also refuse an update whose Waiting
// includes the client id the registry writes meta with.
func InspectUpdate(doc *Doc, update []byte, root string) (RootEffect, error) {
	u, err := decodeUpdate(update)
	if err != nil {
		return RootEffect{}, err
	}
	return inspectDecoded(doc, u, root), nil
}

// InspectParsed is InspectUpdate of an update parsed already (ParseUpdate); it leaves p as it
// was, so p can be applied afterwards.
func InspectParsed(doc *Doc, p *ParsedUpdate, root string) RootEffect {
	return inspectDecoded(doc, p.u, root)
}

// inspectDecoded is InspectUpdate of a decoded update; it reads u and never changes it.
func inspectDecoded(doc *Doc, u *decodedUpdate, root string) RootEffect {
	in := &inspector{doc: doc, u: u, root: root, memo: map[*structRef]placement{}, waiting: map[uint64]bool{}}
	for _, l := range u.clients {
		in.structs += len(l.refs)
	}
	var eff RootEffect
	for _, c := range sortedKeys(u.clients) {
		state := doc.store.state(c)
		for i := range u.clients[c].refs {
			ref := &u.clients[c].refs[i]
			if ref.skip() || ref.it.isGC() || ref.it.clock()+ref.it.len() <= state {
				continue // nothing to integrate
			}
			if in.place(ref) == placedUnder {
				eff.Inserts = true
			}
		}
	}
	eff.Deletes = in.deletesUnderRoot()
	for c := range in.waiting {
		eff.Waiting = append(eff.Waiting, c)
	}
	slices.Sort(eff.Waiting)
	return eff
}

type placement uint8

const (
	placedUnknown   placement = iota // not resolved yet
	placedUnder                      // under the inspected root
	placedElsewhere                  // under another root, or nowhere (GC)
	placedWaiting                    // depends on a missing struct
)

type inspector struct {
	doc     *Doc
	u       *decodedUpdate
	root    string
	memo    map[*structRef]placement
	waiting map[uint64]bool
	structs int // structs in the update
}

// typePlacement is where a type of the document is.
func (in *inspector) typePlacement(t *Type) placement {
	for t.item != nil {
		t = t.item.parent
		if t == nil {
			return placedElsewhere
		}
	}
	if t.rootName == in.root {
		return placedUnder
	}
	return placedElsewhere
}

// lookup finds the struct holding id: in the update (ref) or in the document (it). ok is
// false when neither has it.
func (in *inspector) lookup(id ID) (ref *structRef, it *item, ok bool) {
	if id.Clock < in.doc.store.state(id.Client) {
		return nil, in.doc.store.find(id), true
	}
	if l := in.u.clients[id.Client]; l != nil {
		i, found := slices.BinarySearchFunc(l.refs, id.Clock, func(r structRef, c uint64) int {
			switch {
			case r.it.clock()+r.it.len() <= c:
				return -1
			case r.it.clock() > c:
				return 1
			}
			return 0
		})
		if found {
			return &l.refs[i], nil, true
		}
	}
	return nil, nil, false
}

// place resolves where a struct of the update would be integrated. Chains of structs that
// take their parent from their neighbours are followed iteratively.
func (in *inspector) place(start *structRef) placement {
	var chain []*structRef
	ref := start
	var result placement
	for {
		if p, ok := in.memo[ref]; ok {
			result = p
			break
		}
		next, p := in.step(ref)
		if next == nil {
			result = p
			break
		}
		chain = append(chain, ref)
		if len(chain) > in.structs {
			result = placedWaiting // a cycle of origins: it could never be integrated
			break
		}
		ref = next
	}
	in.memo[ref] = result
	for _, r := range chain {
		in.memo[r] = result
	}
	return result
}

// step resolves one struct directly, or names the struct of the update whose placement it
// shares.
func (in *inspector) step(ref *structRef) (*structRef, placement) {
	it := ref.it
	if ref.skip() || it.isGC() {
		return nil, placedElsewhere
	}
	switch ref.parent() {
	case parentRoot:
		if ref.parentKey() == in.root {
			return nil, placedUnder
		}
		return nil, placedElsewhere
	case parentItem:
		r, pit, ok := in.lookup(ref.parentID())
		switch {
		case !ok:
			in.waiting[ref.parentID().Client] = true
			return nil, placedWaiting
		case pit != nil:
			if ct := pit.childType(); ct != nil && !pit.isGC() {
				return nil, in.typePlacement(ct)
			}
			return nil, placedElsewhere
		}
		if r.skip() || r.it.isGC() || r.it.childType() == nil {
			return nil, placedElsewhere
		}
		// the parent is a type created by this update: it sits where its item sits
		return r, placedUnknown
	}
	// the parent of the origin (or of the right origin), unless either is a GC struct
	var via *structRef
	var from *item
	for _, o := range []struct {
		id ID
		ok bool
	}{{it.origin(), it.hasOrigin()}, {it.rightOrigin(), it.hasRight()}} {
		if !o.ok {
			continue
		}
		r, oit, ok := in.lookup(o.id)
		switch {
		case !ok:
			in.waiting[o.id.Client] = true
			return nil, placedWaiting
		case oit != nil && oit.isGC(), r != nil && (r.skip() || r.it.isGC()):
			return nil, placedElsewhere
		}
		if via == nil && from == nil {
			via, from = r, oit
		}
	}
	if from != nil {
		return nil, in.typePlacement(from.parent)
	}
	return via, placedUnknown
}

// deletesUnderRoot reports whether a delete range of the update hits a live item under the
// root; deletions of clocks the document lacks are noted as waiting.
func (in *inspector) deletesUnderRoot() bool {
	ds := deleteSet{}
	for _, b := range in.u.dels {
		state := in.doc.store.state(b.client)
		for _, r := range b.ranges {
			ds.add(b.client, r.clock, r.len)
			if r.clock+r.len > state {
				in.waiting[b.client] = true
			}
		}
	}
	if ds.empty() {
		return false
	}
	ds.normalize()
	t := in.doc.roots[in.root]
	if t == nil {
		return false
	}
	hit := false
	walkLive(t, func(it *item) bool {
		rs := ds.ranges(it.client())
		i, _ := slices.BinarySearchFunc(rs, it.clock(), func(r delRange, c uint64) int {
			if r.clock+r.len <= c {
				return -1
			}
			return 1
		})
		if i < len(rs) && rs[i].clock < it.clock()+it.len() {
			hit = true
		}
		return !hit
	})
	return hit
}

// walkLive calls f for every live (not deleted) item under t, at any depth, until f
// returns false.
func walkLive(t *Type, f func(*item) bool) {
	stack := []*Type{t}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit := func(it *item) bool {
			if it.deleted() {
				return true
			}
			if !f(it) {
				return false
			}
			if ct := it.childType(); ct != nil {
				stack = append(stack, ct)
			}
			return true
		}
		for it := t.start; it != nil; it = it.right {
			if !visit(it) {
				return
			}
		}
		for _, it := range t.entries {
			if !visit(it) {
				return
			}
		}
	}
}

// Included reports whether applying update to doc would change nothing: every struct it
// carries (Skip structs aside) is already in the document's store, and every range it
// deletes is already deleted there. It decodes and validates the update (a malformed one
// returns a *DecodeError) and changes nothing. Its cost is the update's plus the
// document's structs inside the update's delete ranges.
//
// A degraded hub uses it to take a peer's sync diff that brings nothing new: state exchange
// goes on while writes are refused (docs/protocol.md#degraded-persistence).
func Included(doc *Doc, update []byte) (bool, error) {
	u, err := decodeUpdate(update)
	if err != nil {
		return false, err
	}
	for c, l := range u.clients {
		state := doc.store.state(c)
		for _, ref := range l.refs {
			if !ref.skip() && ref.it.clock()+ref.it.len() > state {
				return false, nil
			}
		}
	}
	for _, b := range u.dels {
		l := doc.store.clients[b.client]
		for _, r := range b.ranges {
			if r.len == 0 {
				continue
			}
			if l == nil || r.clock+r.len > l.state() {
				return false, nil // it would wait as a pending delete
			}
			deleted := true
			// the walk only reads: its position stays valid
			l.each(l.find(r.clock), func(it *item) bool {
				if it.clock() >= r.clock+r.len {
					return false
				}
				deleted = it.deleted()
				return deleted
			})
			if !deleted {
				return false, nil
			}
		}
	}
	return true, nil
}
