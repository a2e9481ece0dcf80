package yjs

import (
	"math"
	"slices"

	"github.com/nomicore/nomicore/lib0"
)

// delRange is a range of deleted clocks of one client.
type delRange struct{ clock, len uint64 }

// deleteSet lists deleted ranges per client, clients in the order they were first added
// (JS Map order). After normalize, each client's ranges are sorted by clock and neither
// overlap nor touch.
type deleteSet struct {
	entries []dsEntry
	index   map[uint64]int // client → entry, built once there are many clients
}

type dsEntry struct {
	client uint64
	ranges []delRange
}

const dsIndexMin = 8 // clients before the set keeps an index

func (ds *deleteSet) find(client uint64) int {
	if ds.index != nil {
		if i, ok := ds.index[client]; ok {
			return i
		}
		return -1
	}
	for i := range ds.entries {
		if ds.entries[i].client == client {
			return i
		}
	}
	return -1
}

// entry returns the entry of client, adding it (and reusing an earlier backing array).
func (ds *deleteSet) entry(client uint64) *dsEntry {
	if i := ds.find(client); i >= 0 {
		return &ds.entries[i]
	}
	n := len(ds.entries)
	if n < cap(ds.entries) {
		ds.entries = ds.entries[:n+1]
		ds.entries[n].client = client
		ds.entries[n].ranges = ds.entries[n].ranges[:0]
	} else {
		ds.entries = append(ds.entries, dsEntry{client: client})
	}
	if ds.index != nil {
		ds.index[client] = n
	} else if n+1 > dsIndexMin {
		ds.index = make(map[uint64]int, 2*(n+1))
		for i, e := range ds.entries {
			ds.index[e.client] = i
		}
	}
	return &ds.entries[n]
}

func (ds *deleteSet) add(client, clock, length uint64) {
	ds.entry(client).push(clock, length)
}

func (e *dsEntry) push(clock, length uint64) {
	if n := len(e.ranges); n == cap(e.ranges) && n >= 256 {
		// double: append grows a large slice by a quarter at a time, which allocates about
		// five times its final size in all (a loaded document adds thousands of ranges)
		e.ranges = append(make([]delRange, 0, 2*n), e.ranges...)
	}
	e.ranges = append(e.ranges, delRange{clock, length})
}

// addDeleted adds the range of a struct a transaction deleted. It extends the client's last
// range when that ends where this one starts: a transaction deletes runs of neighbouring
// structs (a loaded document's whole delete set), which then cost one range, not one each
// (normalize would merge them anyway; gcDeleteSet and mergeDeleteSet then look up fewer).
func (ds *deleteSet) addDeleted(client, clock, length uint64) {
	e := ds.entry(client)
	if n := len(e.ranges); n > 0 && e.ranges[n-1].clock+e.ranges[n-1].len == clock {
		e.ranges[n-1].len += length
		return
	}
	e.push(clock, length)
}

// ranges returns the ranges of client.
func (ds *deleteSet) ranges(client uint64) []delRange {
	if i := ds.find(client); i >= 0 {
		return ds.entries[i].ranges
	}
	return nil
}

// clear empties the set, keeping its memory for reuse.
func (ds *deleteSet) clear() {
	ds.entries = ds.entries[:0]
	ds.index = nil
}

func (ds *deleteSet) empty() bool { return len(ds.entries) == 0 }

// normalize sorts each client's ranges and merges overlapping or adjacent ones.
func (ds *deleteSet) normalize() {
	for i := range ds.entries {
		ds.entries[i].ranges = normalizeRanges(ds.entries[i].ranges)
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

// byClientDesc returns the entries ordered by client, highest first.
func (ds *deleteSet) byClientDesc() []*dsEntry {
	out := make([]*dsEntry, len(ds.entries))
	for i := range ds.entries {
		out[i] = &ds.entries[i]
	}
	slices.SortFunc(out, func(a, b *dsEntry) int {
		switch {
		case a.client > b.client:
			return -1
		case a.client < b.client:
			return 1
		}
		return 0
	})
	return out
}

// write encodes the set: clients with the higher ids first, ranges in their order.
func (ds *deleteSet) write(e *lib0.Encoder) {
	e.AppendWith(func(b []byte) []byte {
		b = lib0.AppendVarUint(b, uint64(len(ds.entries)))
		if len(ds.entries) == 1 {
			return appendDsEntry(b, &ds.entries[0])
		}
		for _, en := range ds.byClientDesc() {
			b = appendDsEntry(b, en)
		}
		return b
	})
}

func appendDsEntry(b []byte, en *dsEntry) []byte {
	b = lib0.AppendVarUint(b, en.client)
	b = lib0.AppendVarUint(b, uint64(len(en.ranges)))
	for _, r := range en.ranges {
		b = lib0.AppendVarUint(lib0.AppendVarUint(b, r.clock), r.len)
	}
	return b
}

// readDeleteSet reads a delete set (clients with no ranges are dropped, ranges kept in
// order, a repeated client's ranges appended), validating every range.
func readDeleteSet(d *lib0.Decoder) deleteSet {
	var ds deleteSet
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
	var out deleteSet
	for _, s := range sets {
		for _, en := range s.entries {
			e := out.entry(en.client)
			e.ranges = append(e.ranges, en.ranges...)
		}
	}
	out.normalize()
	return out
}

// deleteSetFromStore collects the deleted ranges of the store (consecutive deleted structs
// form one range). The walks only read the lists.
func deleteSetFromStore(s *structStore) deleteSet {
	var ds deleteSet
	for c, l := range s.clients {
		var rs []delRange
		open := false
		l.each(spos{}, func(it *item) bool {
			if it.deleted() {
				if open {
					rs[len(rs)-1].len += it.len()
				} else {
					rs = append(rs, delRange{it.clock(), it.len()})
					open = true
				}
			} else {
				open = false
			}
			return true
		})
		if len(rs) > 0 {
			ds.entry(c).ranges = rs
		}
	}
	return ds
}

// writeStoreDeleteSet writes the delete set of the store, as deleteSetFromStore(s).write(e)
// does, without collecting it first.
func writeStoreDeleteSet(e *lib0.Encoder, s *structStore) {
	clients := make([]uint64, 0, len(s.clients))
	for c, l := range s.clients {
		for _, ch := range l.chunks {
			if slices.ContainsFunc(ch, (*item).deleted) {
				clients = append(clients, c)
				break
			}
		}
	}
	slices.Sort(clients)
	var ranges []byte // of one client
	e.AppendWith(func(b []byte) []byte {
		b = lib0.AppendVarUint(b, uint64(len(clients)))
		for i := len(clients) - 1; i >= 0; i-- {
			n := 0
			var clock, length uint64 // of the open range; length 0: none
			ranges = ranges[:0]
			for _, ch := range s.clients[clients[i]].chunks {
				for _, it := range ch {
					switch {
					case !it.deleted():
						if length > 0 {
							ranges = lib0.AppendVarUint(lib0.AppendVarUint(ranges, clock), length)
							n++
							length = 0
						}
					case length > 0:
						length += it.len()
					default:
						clock, length = it.clock(), it.len()
					}
				}
			}
			if length > 0 {
				ranges = lib0.AppendVarUint(lib0.AppendVarUint(ranges, clock), length)
				n++
			}
			b = lib0.AppendVarUint(lib0.AppendVarUint(b, clients[i]), uint64(n))
			b = append(b, ranges...)
		}
		return b
	})
}
