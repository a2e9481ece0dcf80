package yjs

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/nomicore/nomicore/lib0"
)

// Functions on encoded v1 updates, without a document (JS mergeUpdates, diffUpdate,
// encodeStateVectorFromUpdate). They validate their input as ApplyUpdate does and return a
// *DecodeError for malformed bytes. Their output is byte-identical to JS yjs.

// lazyReader reads the structs of one update one at a time.
type lazyReader struct {
	d           *lib0.Decoder
	r           *structReader
	curr        rawStruct
	has         bool
	filterSkips bool

	dec lib0.Decoder // storage for d and r: one allocation per reader
	sr  structReader
}

func newLazyReader(update []byte, filterSkips bool) *lazyReader {
	l := &lazyReader{}
	l.init(update, filterSkips, false)
	return l
}

// init starts reading update; descending also requires its clients in descending order.
func (l *lazyReader) init(update []byte, filterSkips, descending bool) {
	l.filterSkips = filterSkips
	l.dec.Reset(update)
	l.d = &l.dec
	l.sr = structReader{d: l.d, descending: descending}
	l.sr.clientsLeft = l.d.ReadCount(math.MaxInt32, 3)
	l.r = &l.sr
	l.next()
}

func (l *lazyReader) next() {
	for {
		l.has = l.r.advance(&l.curr)
		if !l.has || !l.filterSkips || l.curr.kind != structSkip {
			return
		}
	}
}

// finish reads the delete set after the structs and checks the end of the input.
func (l *lazyReader) finish() (deleteSet, error) {
	if l.d.Err() != nil {
		return deleteSet{}, decodeErr("update", l.d.Err())
	}
	ds := readDeleteSet(l.d)
	if err := l.d.Finish(); err != nil {
		return deleteSet{}, decodeErr("update", err)
	}
	return ds, nil
}

// lazyWriter writes structs as runs of consecutive structs of one client.
type lazyWriter struct {
	buf     *lib0.Encoder // the runs' bytes, one after another
	runs    []lazyRun
	client  uint64
	written int
	start   int
}

type lazyRun struct {
	written    int
	start, end int
}

func newLazyWriter(sizeHint int) *lazyWriter {
	return &lazyWriter{buf: lib0.NewEncoder(sizeHint)}
}

func (w *lazyWriter) write(s *rawStruct, offset uint64) {
	if w.written > 0 && w.client != s.id.Client {
		w.flush()
	}
	if w.written == 0 {
		w.client = s.id.Client
		w.start = w.buf.Len()
		w.buf.WriteVarUint(s.id.Client)
		w.buf.WriteVarUint(s.id.Clock + offset)
	}
	s.write(w.buf, offset)
	w.written++
}

func (w *lazyWriter) flush() {
	if w.written > 0 {
		w.runs = append(w.runs, lazyRun{written: w.written, start: w.start, end: w.buf.Len()})
		w.written = 0
	}
}

// finish returns the struct section followed by the delete set.
func (w *lazyWriter) finish(ds *deleteSet) []byte {
	w.flush()
	out := lib0.NewEncoder(w.buf.Len() + 8*len(w.runs) + 16)
	out.WriteVarUint(uint64(len(w.runs)))
	raw := w.buf.Bytes()
	for _, r := range w.runs {
		out.WriteVarUint(uint64(r.written))
		out.WriteRaw(raw[r.start:r.end])
	}
	ds.write(out)
	return out.Bytes()
}

// sliceStruct returns s without its first diff units (JS sliceStruct). The content of s is
// split: s keeps only its first diff units.
func sliceStruct(s *rawStruct, diff uint64) rawStruct {
	out := *s
	out.id.Clock += diff
	out.length -= diff
	if s.kind == structItem {
		out.hasOrigin = true
		out.origin = ID{s.id.Client, s.id.Clock + diff - 1}
		out.content = s.content.splice(diff)
	}
	return out
}

// mergeRaw appends right onto left when both are GC structs or both Skips (decoded Items
// never merge: JS Item.mergeWith needs left.right === right, which never holds here).
func mergeRaw(left, right *rawStruct) bool {
	if left.kind == right.kind && left.kind != structItem {
		left.length += right.length
		return true
	}
	return false
}

// validateUpdate checks that b is a well-formed v1 update.
func validateUpdate(b []byte, descending bool) error {
	var l lazyReader
	l.init(b, false, descending)
	for l.has {
		l.next()
	}
	_, err := l.finish()
	return err
}

// mergeHeap orders readers as JS mergeUpdates sorts them before every step: higher client
// first, then lower clock; ties go to the reader that advanced most recently (JS sorts
// stably an array whose first element is the one that just advanced), initially to the
// earlier update. Keys are kept in the entries so comparisons touch no reader.
type mergeHeap struct {
	es []mergeEntry
}

type mergeEntry struct {
	client, clock, stamp uint64
	r                    *lazyReader
}

func (h *mergeHeap) less(i, j int) bool {
	a, b := &h.es[i], &h.es[j]
	if a.client != b.client {
		return a.client > b.client
	}
	if a.clock != b.clock {
		return a.clock < b.clock
	}
	return a.stamp > b.stamp
}

func (h *mergeHeap) down(i int) {
	n := len(h.es)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.es[i], h.es[m] = h.es[m], h.es[i]
		i = m
	}
}

func (h *mergeHeap) popTop() {
	last := len(h.es) - 1
	h.es[0] = h.es[last]
	h.es[last] = mergeEntry{}
	h.es = h.es[:last]
	if last > 0 {
		h.down(0)
	}
}

// MergeUpdates merges v1 updates into one (JS mergeUpdates), in time linear in the input
// (times log of the number of updates).
func MergeUpdates(updates [][]byte) ([]byte, error) { return MergeShared(updates, nil) }

// splicedBlock is one client block of an update, for spliceMerge.
type splicedBlock struct {
	client, clock, end uint64 // its client, and the clocks [clock, end) its structs cover
	structs            int
	raw                []byte // the encoded structs, as they are in the update
}

// spliceScratch holds a spliceMerge's working lists between calls (a relay merges the
// queue of every receiver, many times a second): spliceScratchPool keeps them, emptied.
type spliceScratch struct {
	blocks []splicedBlock
	order  []spliceKey
}

var spliceScratchPool = sync.Pool{New: func() any { return new(spliceScratch) }}

// maxSpliceScratch bounds the lists a spliceScratch keeps (a larger merge's are left to the
// collector).
const maxSpliceScratch = 1024

// put empties sc — its blocks point into the merged updates, which it must not keep alive —
// and returns it to the pool.
func (sc *spliceScratch) put() {
	if cap(sc.blocks) > maxSpliceScratch || cap(sc.order) > maxSpliceScratch {
		return
	}
	clear(sc.blocks[:cap(sc.blocks)])
	sc.blocks, sc.order = sc.blocks[:0], sc.order[:0]
	spliceScratchPool.Put(sc)
}

// spliceKey places a splicedBlock (blocks[i]) in the merge's order.
type spliceKey struct {
	client, clock uint64
	i             int
}

// spliceMerge is MergeUpdates in the common case of concurrent edits relayed as they come:
// every struct is an item of text, bytes or deleted content (spliceable), and the blocks of one client follow one another without gap or
// overlap (each update of a client is the next after its previous one). The merge is then
// the blocks as they are, in MergeUpdates's order — client descending, then clock — with the
// blocks of one client joined into one, and the delete sets merged as MergeUpdates merges
// them: the same bytes as the full merge, without decoding and encoding every struct again.
// Every struct is still read and checked as MergeUpdates reads it (its contents measured, not
// kept) — for a shared update (shared[i] when shared is given), once for all the merges it
// goes into (Shared). ok is false when the case does not hold or an update is malformed:
// MergeUpdates then merges in full (and reports the error).
func spliceMerge(updates [][]byte, shared []*Shared) (out []byte, ok bool) {
	sc := spliceScratchPool.Get().(*spliceScratch)
	blocks, order := sc.blocks[:0], sc.order[:0]
	defer func() { sc.blocks, sc.order = blocks, order; sc.put() }()
	var sets []deleteSet
	var d lib0.Decoder
	var seen [8]uint64
	for i, u := range updates {
		var deletes deleteSet
		if shared != nil && shared[i] != nil {
			l := shared[i].splice()
			if !l.ok {
				return nil, false
			}
			blocks = append(blocks, l.blocks...)
			deletes = l.deletes
		} else if blocks, deletes, ok = readSplice(u, blocks, &d, &seen); !ok {
			return nil, false
		}
		if len(deletes.entries) > 0 {
			sets = append(sets, deletes)
		}
	}
	// The blocks in merge order, through keys without pointers (cheap to move). Two blocks
	// of a client at one clock overlap, and are refused below: no tie to keep.
	size := 0
	for i, b := range blocks {
		order = append(order, spliceKey{b.client, b.clock, i})
		size += len(b.raw)
	}
	slices.SortFunc(order, func(a, b spliceKey) int {
		if a.client != b.client {
			return cmp.Compare(b.client, a.client)
		}
		return cmp.Compare(a.clock, b.clock)
	})
	clients := 0
	for i, k := range order {
		if i > 0 && k.client == order[i-1].client {
			if k.clock != blocks[order[i-1].i].end {
				return nil, false // a gap (a Skip in the full merge) or an overlap (a slice)
			}
			continue
		}
		clients++
	}
	ds := mergeDeleteSets(sets)
	e := lib0.NewEncoder(size + 32*clients + 16)
	e.WriteVarUint(uint64(clients))
	for i := 0; i < len(order); {
		j, n := i, 0
		for ; j < len(order) && order[j].client == order[i].client; j++ {
			n += blocks[order[j].i].structs
		}
		e.WriteVarUint(uint64(n))
		e.WriteVarUint(order[i].client)
		e.WriteVarUint(order[i].clock)
		for _, k := range order[i:j] {
			e.WriteRaw(blocks[k.i].raw)
		}
		i = j
	}
	ds.write(e)
	return e.Bytes(), true
}

// spliceLayout is what spliceMerge reads of one update: its client blocks and its delete
// set, or that it cannot be spliced (ok false: a struct that is not spliceable, or a
// malformed update).
type spliceLayout struct {
	blocks  []splicedBlock
	deletes deleteSet
	ok      bool
}

// readSplice reads update u as spliceMerge needs it, appending its blocks to blocks; ok is
// false when u cannot be spliced. d and seen are the caller's scratch (one of each for all
// the updates of a merge).
func readSplice(u []byte, blocks []splicedBlock, d *lib0.Decoder, seen *[8]uint64) (_ []splicedBlock, deletes deleteSet, ok bool) {
	var s rawStruct
	d.Reset(u)
	r := structReader{d: d, descending: true, skim: true, seen: seen[:0]}
	r.clientsLeft = d.ReadCount(math.MaxInt32, 3)
	for r.nextBlock() {
		b := splicedBlock{client: r.client, clock: r.clock, structs: r.structsLeft}
		start := d.Pos()
		for {
			at := d.Pos()
			if !r.next(&s) {
				break
			}
			if s.kind != structItem || !spliceable(u[at]) {
				return blocks, deleteSet{}, false
			}
		}
		if d.Err() != nil || b.structs == 0 {
			return blocks, deleteSet{}, false
		}
		b.end, b.raw = r.clock, u[start:d.Pos()]
		blocks = append(blocks, b)
	}
	if d.Err() != nil {
		return blocks, deleteSet{}, false
	}
	deletes = readDeleteSet(d)
	if d.Finish() != nil {
		return blocks, deleteSet{}, false
	}
	return blocks, deletes, true
}

// spliceable reports whether an item with this info byte is encoded by the full merge as it
// was read, so that copying its bytes gives the full merge's bytes: string, binary and
// deleted contents (a JSON or Any content may be written back in another form), and no
// parentSub flag beside an origin (the full merge drops that flag, which readers ignore).
func spliceable(info byte) bool {
	switch info & 0x1f {
	case refString, refBinary, refDeleted:
		return info&0xc0 == 0 || info&0x20 == 0
	}
	return false
}

// mergeInFull is MergeUpdates of any updates: struct by struct, as JS mergeUpdates.
func mergeInFull(updates [][]byte) ([]byte, error) {
	readers := make([]lazyReader, len(updates))
	size := 0
	h := &mergeHeap{es: make([]mergeEntry, 0, len(updates))}
	for i, u := range updates {
		// The merge (as JS's) interleaves the updates by client, highest first; an update
		// listing its clients in another order would come out with a client split in two
		// blocks, so it is refused.
		r := &readers[i]
		r.init(u, true, true)
		size += len(u)
		if err := r.d.Err(); err != nil {
			return nil, decodeErr("update", err)
		}
		if r.has {
			h.es = append(h.es, mergeEntry{r.curr.id.Client, r.curr.id.Clock, uint64(len(updates) - i), r})
		}
	}
	for i := len(h.es)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	stamp := uint64(len(updates))
	w := newLazyWriter(size)
	var cw rawStruct
	haveCW := false
	for len(h.es) > 0 {
		dec := h.es[0].r
		firstClient := dec.curr.id.Client
		advanced := false
		advance := func() {
			dec.next()
			advanced = true
		}
		if haveCW {
			iterated := false
			for dec.has && dec.curr.end() <= cw.end() && dec.curr.id.Client >= cw.id.Client {
				advance()
				iterated = true
			}
			curr := &dec.curr
			if !dec.has || curr.id.Client != firstClient || (iterated && curr.id.Clock > cw.end()) {
				if err := h.settle(advanced, &stamp); err != nil {
					return nil, err
				}
				continue
			}
			if firstClient != cw.id.Client {
				w.write(&cw, 0)
				cw = *curr
				advance()
			} else if cw.end() < curr.id.Clock {
				if cw.kind == structSkip {
					cw.length = curr.end() - cw.id.Clock
				} else {
					w.write(&cw, 0)
					gap := curr.id.Clock - cw.end()
					cw = rawStruct{kind: structSkip, id: ID{firstClient, cw.end()}, length: gap}
				}
			} else {
				c := *curr
				if diff := cw.end() - curr.id.Clock; diff > 0 {
					if cw.kind == structSkip {
						cw.length -= diff
					} else {
						c = sliceStruct(curr, diff)
					}
				}
				if !mergeRaw(&cw, &c) {
					w.write(&cw, 0)
					cw = c
					advance()
				}
			}
		} else {
			cw = dec.curr
			haveCW = true
			advance()
		}
		for dec.has && dec.curr.id.Client == firstClient && dec.curr.id.Clock == cw.end() && dec.curr.kind != structSkip {
			w.write(&cw, 0)
			cw = dec.curr
			advance()
		}
		if err := h.settle(advanced, &stamp); err != nil {
			return nil, err
		}
	}
	if haveCW {
		w.write(&cw, 0)
	}
	sets := make([]deleteSet, len(readers))
	for i := range readers {
		ds, err := readers[i].finish()
		if err != nil {
			return nil, err
		}
		sets[i] = ds
	}
	ds := mergeDeleteSets(sets)
	return w.finish(&ds), nil
}

// settle restores the heap after its top reader advanced (or not).
func (h *mergeHeap) settle(advanced bool, stamp *uint64) error {
	top := &h.es[0]
	if err := top.r.d.Err(); err != nil {
		return decodeErr("update", err)
	}
	if !top.r.has {
		h.popTop()
		return nil
	}
	if advanced {
		*stamp++
		top.client, top.clock, top.stamp = top.r.curr.id.Client, top.r.curr.id.Clock, *stamp
		h.down(0)
	}
	return nil
}

// DiffUpdate returns the part of update that a peer with the encoded state vector sv lacks
// (JS diffUpdate).
func DiffUpdate(update, sv []byte) ([]byte, error) {
	state, err := DecodeStateVector(sv)
	if err != nil {
		return nil, err
	}
	w := newLazyWriter(len(update))
	r := newLazyReader(update, false)
	for r.has {
		curr := &r.curr
		client := curr.id.Client
		svClock := state[client]
		if curr.kind == structSkip {
			r.next()
			continue
		}
		if curr.end() > svClock {
			off := uint64(0)
			if svClock > curr.id.Clock {
				off = svClock - curr.id.Clock
			}
			w.write(curr, off)
			r.next()
			for r.has && r.curr.id.Client == client {
				w.write(&r.curr, 0)
				r.next()
			}
		} else {
			for r.has && r.curr.id.Client == client && r.curr.end() <= svClock {
				r.next()
			}
		}
	}
	ds, err := r.finish()
	if err != nil {
		return nil, err
	}
	return w.finish(&ds), nil
}

// EncodeStateVectorFromUpdate returns the state vector an update brings a document to, for
// the clients whose structs start at clock 0 without a Skip (JS
// encodeStateVectorFromUpdate).
func EncodeStateVectorFromUpdate(update []byte) ([]byte, error) {
	r := newLazyReader(update, false)
	type entry struct{ client, clock uint64 }
	var entries []entry
	if r.has {
		currClient := r.curr.id.Client
		stopCounting := r.curr.id.Clock != 0
		currClock := uint64(0)
		if !stopCounting {
			currClock = r.curr.end()
		}
		for ; r.has; r.next() {
			curr := &r.curr
			if currClient != curr.id.Client {
				if currClock != 0 {
					entries = append(entries, entry{currClient, currClock})
				}
				currClient = curr.id.Client
				currClock = 0
				stopCounting = curr.id.Clock != 0
			}
			if curr.kind == structSkip {
				stopCounting = true
			}
			if !stopCounting {
				currClock = curr.end()
			}
		}
		if currClock != 0 {
			entries = append(entries, entry{currClient, currClock})
		}
	}
	if _, err := r.finish(); err != nil {
		return nil, err
	}
	e := lib0.NewEncoder(1 + 8*len(entries))
	e.WriteVarUint(uint64(len(entries)))
	for _, en := range entries {
		e.WriteVarUint(en.client)
		e.WriteVarUint(en.clock)
	}
	return e.Bytes(), nil
}

// UpdateRanges returns, for each client whose structs an update carries, the clock of its
// first struct (from) and the end of its last one (to): the clock range the update covers,
// Skip structs included (JS parseUpdateMeta). The delete set is validated but not reported.
func UpdateRanges(update []byte) (from, to map[uint64]uint64, err error) {
	from, to = map[uint64]uint64{}, map[uint64]uint64{}
	r := newLazyReader(update, false)
	for ; r.has; r.next() {
		c := r.curr.id.Client
		if _, seen := from[c]; !seen {
			from[c] = r.curr.id.Clock
		}
		to[c] = r.curr.end()
	}
	if _, err := r.finish(); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}
