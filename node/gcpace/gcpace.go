// Package gcpace sets how much the Go heap may grow between two garbage collections in a
// hub: at least a fixed amount, and otherwise as much as was live.
//
// Go's collector starts a cycle when the heap has grown by GOGC percent of what the last
// cycle found live. A cycle has a fixed cost besides the marking that grows with the live
// heap: with a small live heap — a relay that keeps a few megabytes of documents — GOGC 100
// runs the collector every few megabytes allocated, and under a relay load the fixed part
// took a noticeable share of the hub's CPU. A large GOGC for every heap trades that for
// memory that grows with the heap: at GOGC 200 a hub with 1 GiB live may reach 3 GiB.
//
// The Pacer keeps the headroom (the growth allowed before the next cycle) at the larger of
// the live heap (GOGC 100) and a floor: a small heap gets the floor, so the collector runs
// no more often than once per floor allocated; a large heap gets GOGC 100's twice its live
// size. It re-reads the live heap after each collection and sets GOGC from it.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the hub's minimum headroom. The relay benchmark's fan-out keeps 3–5 MiB
// live: with 6 MiB of headroom it is collected as often as under GOGC 200 (about ten
// collections a run either way) at the same peak RSS; its multidoc keeps about 9 MiB live
// and is paced as under GOGC 100 (peak RSS about 6 MiB lower than under GOGC 200). A larger
// floor saves a few collections for as many MiB of memory: 10 MiB took fan-out from ten
// collections to six and its peak RSS up by 5 MiB.
const DefaultFloor = 6 << 20

// runtimeMinHeap is the Go runtime's smallest heap goal at GOGC 100; it scales with GOGC
// (the GC guide's "minimum total heap size"). Below a few MiB live it, not the live heap,
// sets the goal.
const runtimeMinHeap = 4 << 20

// Percent is the GOGC that gives a heap with live bytes live a goal of live + max(live,
// floor): 100 from floor up, more below it. Before the first collection (live 0) and for
// a heap of a few MiB, where the runtime's minimum heap sets the goal, it is the GOGC
// whose minimum heap is live + floor.
func Percent(live, floor uint64) int {
	if live >= floor {
		return 100
	}
	byMinimum := (live + floor) * 100 / runtimeMinHeap
	if live == 0 {
		return int(max(byMinimum, 100))
	}
	p := (floor*100 + live - 1) / live // rounded up: the headroom is at least floor
	return int(max(min(p, byMinimum), 100))
}

// Pacer sets GOGC after every garbage collection (Start).
type Pacer struct {
	floor uint64

	// mu guards stopped and percent: the runtime's cleanup goroutine runs adjust, Stop runs
	// on the caller's.
	mu      sync.Mutex
	stopped bool
	percent int // the GOGC set last
}

// Start sets GOGC from the live heap now and after every collection from then on, keeping
// the headroom at least floor bytes. Stop ends it; GOGC stays as last set.
func Start(floor uint64) *Pacer {
	p := &Pacer{floor: floor}
	p.adjust()
	return p
}

// Stop ends the pacing: GOGC is no longer changed.
func (p *Pacer) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// Percent returns the GOGC the Pacer set last.
func (p *Pacer) Percent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.percent
}

// sentinel is allocated for one collection: its cleanup runs once a cycle has found it
// unreachable, that is after the next collection (it is larger than the tiny allocator's
// blocks, so it is freed alone).
type sentinel [4]uint64

// adjust sets GOGC from the live heap the last collection found and arms itself for the
// next one.
func (p *Pacer) adjust() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	var bytes uint64
	if live[0].Value.Kind() == metrics.KindUint64 {
		bytes = live[0].Value.Uint64()
	}
	if pct := Percent(bytes, p.floor); pct != p.percent {
		debug.SetGCPercent(pct)
		p.percent = pct
	}
	runtime.AddCleanup(new(sentinel), func(p *Pacer) { p.adjust() }, p)
}
