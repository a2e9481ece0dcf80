package yjs

import (
	"fmt"
	"slices"
)

// The struct store keeps, per client, its structs ordered by clock without gaps from 0. A
// client's list is chunked so that a struct is found by clock in O(log n) and inserting a
// split part in the middle costs O(chunk), not O(n). A chunk splits in two when it grows
// beyond chunkMax structs: 512 (chunk.go), or 4 in a build with the tag yjs_smallchunks
// (chunk_small.go), which the tests use to put every list operation across chunk edges.

// structList is the struct list of one client.
type structList struct {
	chunks [][]*item
	n      int
	hints  [2]spos // positions find searched for lately (checked before use: they may be stale)
}

// spos is a position in a structList: chunk c, index i. A position is valid until the list
// changes. insertAfter may split a chunk in two, which moves the structs of its right half to
// a new chunk and shifts the chunks after it; remove shifts the structs after the removed one
// and drops a chunk it empties. Code that keeps a position across either re-derives it (from
// what insertAfter returns, or with find) or only ever uses positions that the change cannot
// have moved; each such place says which.
type spos struct{ c, i int }

func (l *structList) at(p spos) *item { return l.chunks[p.c][p.i] }

func (l *structList) last() *item {
	c := l.chunks[len(l.chunks)-1]
	return c[len(c)-1]
}

func (l *structList) lastPos() spos {
	return spos{len(l.chunks) - 1, len(l.chunks[len(l.chunks)-1]) - 1}
}

// state is the next clock of the client.
func (l *structList) state() uint64 { return l.last().endClock() }

func (l *structList) next(p spos) (spos, bool) {
	if p.i+1 < len(l.chunks[p.c]) {
		return spos{p.c, p.i + 1}, true
	}
	if p.c+1 < len(l.chunks) {
		return spos{p.c + 1, 0}, true
	}
	return p, false
}

func (l *structList) prev(p spos) (spos, bool) {
	if p.i > 0 {
		return spos{p.c, p.i - 1}, true
	}
	if p.c > 0 {
		return spos{p.c - 1, len(l.chunks[p.c-1]) - 1}, true
	}
	return p, false
}

func (l *structList) isFirst(p spos) bool { return p.c == 0 && p.i == 0 }

func (l *structList) append(it *item) {
	l.n++
	last := len(l.chunks) - 1
	if last < 0 || len(l.chunks[last]) >= chunkMax {
		l.chunks = append(l.chunks, make([]*item, 0, min(16, chunkMax)))
		last++
	}
	l.chunks[last] = append(l.chunks[last], it)
}

// find returns the position of the struct containing clock. The clock must be below the
// client's state.
func (l *structList) find(clock uint64) spos {
	// Integration asks again and again for a struct found lately (an item's origin, then
	// its right origin), or the one after it, or the last struct: those are tried first.
	for k, h := range l.hints {
		if h.c >= len(l.chunks) || h.i >= len(l.chunks[h.c]) {
			continue
		}
		s := l.chunks[h.c][h.i]
		if s.clock() > clock {
			continue
		}
		if clock < s.endClock() {
			return h
		}
		if n, ok := l.next(h); ok {
			if s := l.at(n); s.clock() <= clock && clock < s.endClock() {
				l.hints[k] = n
				return n
			}
		}
	}
	last := l.lastPos()
	if l.at(last).clock() <= clock {
		if clock < l.at(last).endClock() {
			return last
		}
		panic(fmt.Sprintf("yjs: clock %d not in the struct store (state %d)", clock, l.state()))
	}
	// the chunk: the last one whose first clock is <= clock (a hint's, often: then the
	// search starts at the hint, for walks over nearby ranges)
	c, from := -1, -1
	for _, h := range l.hints {
		if h.c < len(l.chunks) && l.chunks[h.c][0].clock() <= clock && (h.c+1 == len(l.chunks) || l.chunks[h.c+1][0].clock() > clock) {
			c, from = h.c, min(h.i, len(l.chunks[h.c])-1)
			break
		}
	}
	if c < 0 {
		lo, hi := 0, len(l.chunks)-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if l.chunks[mid][0].clock() <= clock {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		c = lo
	}
	p := spos{c, findIn(l.chunks[c], clock, from)}
	l.hints[1], l.hints[0] = l.hints[0], p
	return p
}

// findIn returns the index of the struct holding clock in ch, which holds it. The first probe
// is at from, or (from < 0) where the clock would be if the structs were of equal length (as
// JS findIndexSS guesses); from there the search widens its steps until it brackets the
// struct, then halves.
func findIn(ch []*item, clock uint64, from int) int {
	n := len(ch)
	i := from
	if i < 0 {
		first, end := ch[0].clock(), ch[n-1].endClock()
		i = int(uint64(n-1) * (clock - first) / (end - first))
	}
	lo, hi := 0, n-1
	switch s := ch[i]; {
	case clock < s.clock():
		hi = i - 1
		for step := 1; ; step *= 2 {
			j := i - step
			if j <= lo {
				break
			}
			if ch[j].clock() <= clock {
				lo = j
				break
			}
			hi = j - 1
		}
	case clock >= s.endClock():
		lo = i + 1
		for step := 1; ; step *= 2 {
			j := i + step
			if j >= hi {
				break
			}
			if ch[j].clock() > clock {
				hi = j - 1
				break
			}
			lo = j
		}
	default:
		return i
	}
	for lo <= hi {
		mid := (lo + hi) / 2
		s := ch[mid]
		if s.clock() <= clock {
			if clock < s.endClock() {
				return mid
			}
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	panic(fmt.Sprintf("yjs: clock %d not in its chunk [%d, %d)", clock, ch[0].clock(), ch[n-1].endClock()))
}

// insertAfter puts it right after position p and returns its position.
func (l *structList) insertAfter(p spos, it *item) spos {
	l.n++
	ch := l.chunks[p.c]
	if len(ch) == cap(ch) {
		ch = growChunk(ch, len(ch)+1)
	}
	ch = slices.Insert(ch, p.i+1, it)
	l.chunks[p.c] = ch
	np := spos{p.c, p.i + 1}
	if len(ch) > chunkMax {
		half := len(ch) / 2
		right := growChunk(ch[half:], len(ch)-half)
		l.chunks[p.c] = growChunk(ch[:half], half)
		l.chunks = slices.Insert(l.chunks, p.c+1, right)
		if np.i >= half {
			np = spos{p.c + 1, np.i - half}
		}
	}
	return np
}

// growChunk returns a copy of ch with room for n structs and a little more (what fills its
// allocation): a chunk grows by a sixteenth at a time, so that a list of many chunks holds
// little spare room (one pointer per struct is a good part of what a document costs).
func growChunk(ch []*item, n int) []*item {
	out := slices.Grow([]*item(nil), min(n+n/16+1, chunkMax+1))
	return append(out, ch...)
}

// remove deletes the struct at p.
func (l *structList) remove(p spos) {
	l.n--
	ch := l.chunks[p.c]
	copy(ch[p.i:], ch[p.i+1:])
	ch[len(ch)-1] = nil
	ch = ch[:len(ch)-1]
	if len(ch) == 0 && len(l.chunks) > 1 {
		l.chunks = slices.Delete(l.chunks, p.c, p.c+1)
		return
	}
	if cap(ch) > len(ch)+len(ch)/4+8 && p.c < len(l.chunks)-1 {
		ch = growChunk(ch, len(ch)) // a chunk that lost a fifth of its structs gives back its room
	}
	l.chunks[p.c] = ch
}

// each calls f for every struct from position p on, until f returns false.
func (l *structList) each(p spos, f func(*item) bool) {
	for c := p.c; c < len(l.chunks); c++ {
		start := 0
		if c == p.c {
			start = p.i
		}
		for _, it := range l.chunks[c][start:] {
			if !f(it) {
				return
			}
		}
	}
}

// structStore is the struct store of a document.
type structStore struct {
	clients map[uint64]*structList
	// the list looked up last: integration asks for the same client again and again
	lastClient uint64
	lastList   *structList
}

// list returns the struct list of client (nil if it has none).
func (s *structStore) list(client uint64) *structList {
	if s.lastList != nil && s.lastClient == client {
		return s.lastList
	}
	l := s.clients[client]
	if l != nil {
		s.lastClient, s.lastList = client, l
	}
	return l
}

func newStructStore() structStore {
	return structStore{clients: make(map[uint64]*structList)}
}

func (s *structStore) state(client uint64) uint64 {
	if l := s.list(client); l != nil {
		return l.state()
	}
	return 0
}

func (s *structStore) stateVector() StateVector {
	sv := make(StateVector, len(s.clients))
	for c, l := range s.clients {
		sv[c] = l.state()
	}
	return sv
}

// add appends a struct at its client's state.
func (s *structStore) add(it *item) {
	l := s.list(it.client())
	if l == nil {
		l = &structList{}
		s.clients[it.client()] = l
	} else if l.state() != it.clock() {
		panic(fmt.Sprintf("yjs: struct %d:%d added at state %d", it.client(), it.clock(), l.state()))
	}
	l.append(it)
}

// find returns the struct containing id (which must exist).
func (s *structStore) find(id ID) *item {
	l := s.list(id.Client)
	if l == nil {
		panic(fmt.Sprintf("yjs: client %d not in the struct store", id.Client))
	}
	return l.at(l.find(id.Clock))
}

// cleanStart returns the position of the struct starting at clock, splitting an Item that
// contains it (a GC struct is returned as is). The position is the one insertAfter returns
// after the split, so it is valid whether or not the chunk was split.
func (s *structStore) cleanStart(tx *Transaction, l *structList, clock uint64) spos {
	p := l.find(clock)
	it := l.at(p)
	if it.clock() < clock && !it.isGC() {
		return l.insertAfter(p, splitItem(tx, it, clock-it.clock()))
	}
	return p
}

// itemCleanStart returns the struct starting at id, splitting if needed.
func (s *structStore) itemCleanStart(tx *Transaction, id ID) *item {
	l := s.list(id.Client)
	return l.at(s.cleanStart(tx, l, id.Clock))
}

// itemCleanEnd returns the struct ending at id, splitting if needed. It returns the struct,
// not its position: the split may have moved it.
func (s *structStore) itemCleanEnd(tx *Transaction, id ID) *item {
	l := s.list(id.Client)
	p := l.find(id.Clock)
	it := l.at(p)
	if id.Clock != it.clock()+it.len()-1 && !it.isGC() {
		l.insertAfter(p, splitItem(tx, it, id.Clock-it.clock()+1))
	}
	return it
}

// index returns the ordinal of position p in the list.
func (l *structList) index(p spos) int {
	n := p.i
	for c := 0; c < p.c; c++ {
		n += len(l.chunks[c])
	}
	return n
}
