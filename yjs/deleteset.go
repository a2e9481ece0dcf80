package yjs

import (
	"math"
	"slices"

	"github.com/nomicore/nomicore/lib0"
)

// delRange is a range of deleted clocks of one client.
type delRange struct{ clock, len uint64 }

// deleteSet lists deleted ranges per client. After normalize, each client's ranges are
// sorted by clock and neither overlap nor touch.
type deleteSet struct {
	clients map[uint64][]delRange
	order   []uint64 // clients in the order they were first added (JS Map order)
}

func newDeleteSet() deleteSet { return deleteSet{clients: make(map[uint64][]delRange)} }

func (ds *deleteSet) add(client, clock, length uint64) {
	rs, ok := ds.clients[client]
	if !ok {
		ds.order = append(ds.order, client)
	}
	ds.clients[client] = append(rs, delRange{clock, length})
}

func (ds *deleteSet) clear() {
	clear(ds.clients)
	ds.order = ds.order[:0]
}

func (ds *deleteSet) empty() bool { return len(ds.clients) == 0 }

// normalize sorts each client's ranges and merges overlapping or adjacent ones.
func (ds *deleteSet) normalize() {
	for c, rs := range ds.clients {
		ds.clients[c] = normalizeRanges(rs)
	}
}

func normalizeRanges(rs []delRange) []delRange {
	if len(rs) < 2 {
		return rs
	}
	if !slices.IsSortedFunc(rs, cmpRange) {
		slices.SortStableFunc(rs, cmpRange)
	}
	j := 1
	for i := 1; i < len(rs); i++ {
		l := &rs[j-1]
		r := rs[i]
		if l.clock+l.len >= r.clock {
			l.len = max(l.len, r.clock+r.len-l.clock)
		} else {
			rs[j] = r
			j++
		}
	}
	return rs[:j]
}

func cmpRange(a, b delRange) int {
	switch {
	case a.clock < b.clock:
		return -1
	case a.clock > b.clock:
		return 1
	}
	return 0
}

// contains reports whether id is in the (normalized) set.
func (ds *deleteSet) contains(id ID) bool {
	rs := ds.clients[id.Client]
	i, _ := slices.BinarySearchFunc(rs, id.Clock, func(r delRange, c uint64) int {
		switch {
		case r.clock+r.len <= c:
			return -1
		case r.clock > c:
			return 1
		}
		return 0
	})
	return i < len(rs) && rs[i].clock <= id.Clock && id.Clock < rs[i].clock+rs[i].len
}

// write encodes the set: clients with the higher ids first, ranges in their order.
func (ds *deleteSet) write(e *lib0.Encoder) {
	clients := make([]uint64, 0, len(ds.clients))
	for c := range ds.clients {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	e.WriteVarUint(uint64(len(clients)))
	for i := len(clients) - 1; i >= 0; i-- {
		rs := ds.clients[clients[i]]
		e.WriteVarUint(clients[i])
		e.WriteVarUint(uint64(len(rs)))
		for _, r := range rs {
			e.WriteVarUint(r.clock)
			e.WriteVarUint(r.len)
		}
	}
}

// readDeleteSet reads a delete set (clients with no ranges are dropped, ranges kept in
// order, a repeated client's ranges appended), validating every range.
func readDeleteSet(d *lib0.Decoder) deleteSet {
	ds := newDeleteSet()
	n := d.ReadCount(math.MaxInt32, 2)
	for i := 0; i < n && d.Err() == nil; i++ {
		client := d.ReadVarUint()
		m := d.ReadCount(math.MaxInt32, 2)
		for j := 0; j < m && d.Err() == nil; j++ {
			clock, length := readDelRange(d)
			if d.Err() == nil {
				ds.add(client, clock, length)
			}
		}
	}
	return ds
}

func readDelRange(d *lib0.Decoder) (clock, length uint64) {
	clock = d.ReadVarUint()
	length = d.ReadVarUint()
	if d.Err() != nil {
		return 0, 0
	}
	if length == 0 {
		d.Fail(ErrZeroLength)
	} else if clock+length > maxClock {
		d.Fail(ErrClockRange)
	}
	return clock, length
}

// mergeDeleteSets unions sets into one normalized set.
func mergeDeleteSets(sets []deleteSet) deleteSet {
	out := newDeleteSet()
	for _, s := range sets {
		for _, c := range s.order {
			if _, ok := out.clients[c]; !ok {
				out.order = append(out.order, c)
			}
			out.clients[c] = append(out.clients[c], s.clients[c]...)
		}
	}
	out.normalize()
	return out
}

// deleteSetFromStore collects the deleted ranges of the store (consecutive deleted structs
// form one range).
func deleteSetFromStore(s *structStore) deleteSet {
	ds := newDeleteSet()
	for c, l := range s.clients {
		var rs []delRange
		open := false
		l.each(spos{}, func(it *Item) bool {
			if it.deleted() {
				if open {
					rs[len(rs)-1].len += it.length
				} else {
					rs = append(rs, delRange{it.id.Clock, it.length})
					open = true
				}
			} else {
				open = false
			}
			return true
		})
		if len(rs) > 0 {
			ds.clients[c] = rs
			ds.order = append(ds.order, c)
		}
	}
	return ds
}
