package yjs

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The struct list against a model: a plain slice of the same structs. Random appends,
// splits (the right part inserted after the left, as splitItem and cleanStart do), merges
// (the left part absorbing its right neighbour, which is removed, as mergeWithLefts does),
// finds, walks and index lookups must agree with the slice, and the list must keep its
// invariants after every step. The same steps run from random seeds (property test) and from
// fuzzed bytes (FuzzStructList); with -tags yjs_smallchunks the chunks hold 4 structs, so
// every step crosses chunk edges.

// bareStruct returns a struct with only an id and a length, as the list sees it.
func bareStruct(id ID, length uint64) *item {
	it := &item{}
	it.setID(id)
	it.setLen(length)
	return it
}

// listModel drives a structList and its slice model with the same operations.
type listModel struct {
	l     structList
	model []*item
	t     testing.TB
	steps int
}

func (m *listModel) state() uint64 {
	if len(m.model) == 0 {
		return 0
	}
	return m.model[len(m.model)-1].endClock()
}

func (m *listModel) push(length uint64) {
	it := bareStruct(ID{7, m.state()}, length)
	m.l.append(it)
	m.model = append(m.model, it)
}

// modelIndex returns the index of the struct holding clock.
func (m *listModel) modelIndex(clock uint64) int {
	for i, it := range m.model {
		if it.clock() <= clock && clock < it.endClock() {
			return i
		}
	}
	m.t.Fatalf("model: clock %d not held (state %d)", clock, m.state())
	return -1
}

// split cuts the struct holding clock at clock (when it starts before it) and inserts the
// right part after it, checking the position insertAfter returns.
func (m *listModel) split(clock uint64) {
	p := m.l.find(clock)
	it := m.l.at(p)
	i := m.modelIndex(clock)
	if m.model[i] != it {
		m.t.Fatalf("find(%d) = %d:%d, model %d:%d", clock, it.client(), it.clock(), m.model[i].client(), m.model[i].clock())
	}
	if it.clock() == clock {
		return
	}
	right := bareStruct(ID{7, clock}, it.endClock()-clock)
	it.setLen(clock - it.clock())
	np := m.l.insertAfter(p, right)
	if got := m.l.at(np); got != right {
		m.t.Fatalf("insertAfter returned a position holding %d, not the inserted struct %d", got.clock(), clock)
	}
	if m.l.index(np) != i+1 {
		m.t.Fatalf("inserted struct at index %d, want %d", m.l.index(np), i+1)
	}
	m.model = append(m.model[:i+1], append([]*item{right}, m.model[i+1:]...)...)
}

// merge makes the struct holding clock absorb its right neighbour, which is removed.
func (m *listModel) merge(clock uint64) {
	p := m.l.find(clock)
	np, ok := m.l.next(p)
	i := m.modelIndex(clock)
	if ok != (i+1 < len(m.model)) {
		m.t.Fatalf("next of index %d: %v, model has %d structs", i, ok, len(m.model))
	}
	if !ok {
		return
	}
	left, right := m.l.at(p), m.l.at(np)
	if right != m.model[i+1] {
		m.t.Fatalf("next of %d holds %d, model %d", left.clock(), right.clock(), m.model[i+1].clock())
	}
	left.setLen(left.len() + right.len())
	m.l.remove(np)
	if m.l.at(p) != left {
		m.t.Fatal("removing the struct after p moved the struct at p")
	}
	m.model = append(m.model[:i+1], m.model[i+2:]...)
}

// probe checks find, at, index, next, prev and each around clock against the model.
func (m *listModel) probe(clock uint64, walk int) {
	p := m.l.find(clock)
	i := m.modelIndex(clock)
	if m.l.at(p) != m.model[i] {
		m.t.Fatalf("find(%d) holds %d, model %d", clock, m.l.at(p).clock(), m.model[i].clock())
	}
	if m.l.index(p) != i {
		m.t.Fatalf("index of find(%d) = %d, model %d", clock, m.l.index(p), i)
	}
	if m.l.isFirst(p) != (i == 0) {
		m.t.Fatalf("isFirst at index %d: %v", i, m.l.isFirst(p))
	}
	q, j := p, i
	for s := 0; s < walk; s++ {
		nq, ok := m.l.next(q)
		if ok != (j+1 < len(m.model)) {
			m.t.Fatalf("next from index %d: %v, model has %d", j, ok, len(m.model))
		}
		if !ok {
			break
		}
		q, j = nq, j+1
		if m.l.at(q) != m.model[j] {
			m.t.Fatalf("walking right to index %d: struct %d, model %d", j, m.l.at(q).clock(), m.model[j].clock())
		}
	}
	q, j = p, i
	for s := 0; s < walk; s++ {
		pq, ok := m.l.prev(q)
		if ok != (j > 0) {
			m.t.Fatalf("prev from index %d: %v", j, ok)
		}
		if !ok {
			break
		}
		q, j = pq, j-1
		if m.l.at(q) != m.model[j] {
			m.t.Fatalf("walking left to index %d: struct %d, model %d", j, m.l.at(q).clock(), m.model[j].clock())
		}
	}
	n := 0
	m.l.each(p, func(it *item) bool {
		if it != m.model[i+n] {
			m.t.Fatalf("each from index %d: struct %d at step %d, model %d", i, it.clock(), n, m.model[i+n].clock())
		}
		n++
		return n < walk
	})
	if want := min(walk, len(m.model)-i); n != want {
		m.t.Fatalf("each from index %d visited %d structs, want %d", i, n, want)
	}
}

// check compares the whole list with the model and checks its invariants.
func (m *listModel) check() {
	m.t.Helper()
	checkStructList(m.t, &m.l)
	i := 0
	for _, ch := range m.l.chunks {
		for _, it := range ch {
			if it != m.model[i] {
				m.t.Fatalf("struct %d is %d, model %d", i, it.clock(), m.model[i].clock())
			}
			i++
		}
	}
	if i != len(m.model) {
		m.t.Fatalf("the list holds %d structs, the model %d", i, len(m.model))
	}
	if m.l.last() != m.model[len(m.model)-1] || m.l.at(m.l.lastPos()) != m.l.last() {
		m.t.Fatal("last and lastPos do not name the model's last struct")
	}
	if m.l.state() != m.state() {
		m.t.Fatalf("state %d, model %d", m.l.state(), m.state())
	}
}

// step runs one operation chosen by op with argument arg. Every operation checks what it
// touched; the whole list is compared with the model every eighth step (and by the caller at
// the end).
func (m *listModel) step(op byte, arg uint32) {
	m.steps++
	switch {
	case len(m.model) == 0 || op%8 == 0:
		m.push(1 + uint64(arg%9))
	case op%8 <= 4: // splits outnumber merges: the list grows across many chunks
		m.split(uint64(arg) % m.state())
	case op%8 == 5:
		m.merge(uint64(arg) % m.state())
	default:
		m.probe(uint64(arg)%m.state(), 1+int(op>>3)%(2*chunkMax+3))
	}
	if m.steps%8 == 0 {
		m.check()
	}
}

func TestStructListAgreesWithSlice(t *testing.T) {
	runs, steps := 20, 6000
	if testing.Short() || raceEnabled {
		runs = 4
	}
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x1157))
			m := &listModel{t: t}
			// a long first struct to split into many: lists far beyond one chunk
			m.push(uint64(chunkMax) * 8)
			for s := 0; s < steps; s++ {
				m.step(byte(rng.Uint32()), rng.Uint32())
			}
			m.check()
			if len(m.l.chunks) < 3 {
				t.Fatalf("the list grew to %d chunks only", len(m.l.chunks))
			}
		})
	}
}

// FuzzStructList: the steps of TestStructListAgreesWithSlice, five bytes each (an operation
// and its argument), from a list of one long struct.
func FuzzStructList(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 8; n++ {
		b := make([]byte, 5*(1+rng.IntN(600)))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := &listModel{t: t}
		m.push(uint64(chunkMax) * 4)
		for len(ops) >= 5 {
			m.step(ops[0], binary.LittleEndian.Uint32(ops[1:5]))
			ops = ops[5:]
		}
		m.check()
	})
}
