package yjs

import (
	"slices"

	"github.com/nomicore/nomicore/lib0"
)

// EncodeStateVector returns the v1 state vector of doc (JS encodeStateVector). It is
// encoded straight from the struct store — the same bytes as
// EncodeStateVector(StateVector), without the map in between — since a hub encodes one
// for every sync answer and change-feed record.
func (d *Doc) EncodeStateVector() []byte {
	states := make([]clientClock, 0, len(d.store.clients))
	for c, l := range d.store.clients {
		states = append(states, clientClock{c, l.state()})
	}
	return encodeStateVector(states)
}

// EncodeStateAsUpdate returns a v1 update with everything in doc that a peer with the
// encoded state vector sv lacks (nil or empty sv: everything), including pending structs
// and deletions (JS encodeStateAsUpdate). A malformed sv returns a *DecodeError.
func EncodeStateAsUpdate(doc *Doc, sv []byte) ([]byte, error) {
	if len(sv) == 0 {
		sv = []byte{0}
	}
	target, err := DecodeStateVector(sv)
	if err != nil {
		return nil, err
	}
	size := doc.stateSizeHint
	if size == 0 {
		for _, l := range doc.store.clients {
			size += 4 * l.n
		}
	}
	e := lib0.NewEncoder(size + size/8 + 64)
	doc.writeStructsFrom(e, doc.startsFor(target))
	writeStoreDeleteSet(e, &doc.store)
	if len(target) == 0 {
		doc.stateSizeHint = e.Len()
	}
	updates := [][]byte{e.Bytes()}
	if doc.pendingDels != nil {
		pe := lib0.NewEncoder(32)
		pe.WriteVarUint(0)
		doc.pendingDels.write(pe)
		updates = append(updates, pe.Bytes())
	}
	if doc.pending != nil {
		diff, err := DiffUpdate(doc.pending.update, sv)
		if err != nil {
			return nil, &InternalError{Op: "EncodeStateAsUpdate", Cause: err}
		}
		updates = append(updates, diff)
	}
	if len(updates) > 1 {
		return MergeUpdates(updates)
	}
	return updates[0], nil
}

// startsFor lists, for every client whose state exceeds its clock in sv, the clock to
// write from (clients missing from sv from 0), the highest client ids first (JS
// writeClientsStructs).
func (d *Doc) startsFor(sv StateVector) []clientClock {
	var starts []clientClock
	for c, clock := range sv {
		if d.store.state(c) > clock {
			starts = append(starts, clientClock{c, clock})
		}
	}
	for c := range d.store.clients {
		if _, ok := sv[c]; !ok {
			starts = append(starts, clientClock{c, 0})
		}
	}
	sortStarts(starts)
	return starts
}

func sortStarts(starts []clientClock) {
	if len(starts) < 2 {
		return
	}
	slices.SortFunc(starts, func(a, b clientClock) int {
		switch {
		case a.client > b.client:
			return -1
		case a.client < b.client:
			return 1
		}
		return 0
	})
}

// writeStructsFrom writes the structs of each listed client from its clock. Writing changes
// nothing, so the position found stays valid through the walk.
func (d *Doc) writeStructsFrom(e *lib0.Encoder, starts []clientClock) {
	var ce *lib0.Encoder
	e.AppendWith(func(b []byte) []byte {
		b = lib0.AppendVarUint(b, uint64(len(starts)))
		for _, s := range starts {
			l := d.store.clients[s.client]
			p := l.find(s.clock)
			b = lib0.AppendVarUint(b, uint64(l.n-l.index(p)))
			b = lib0.AppendVarUint(b, s.client)
			b = lib0.AppendVarUint(b, s.clock)
			for c := p.c; c < len(l.chunks); c++ {
				ch := l.chunks[c]
				if c == p.c {
					b = ch[p.i].appendTo(b, s.clock-ch[p.i].clock(), &ce)
					ch = ch[p.i+1:]
				}
				for _, it := range ch {
					b = it.appendTo(b, 0, &ce)
				}
			}
		}
		return b
	})
}
