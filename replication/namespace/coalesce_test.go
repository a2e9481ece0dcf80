package namespace_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yjs"
)

// mergeCounter replaces the merge of coalescing for a test and counts what it merges.
type mergeCounter struct {
	mu     sync.Mutex // guards calls, inputs, shared
	calls  int
	inputs int // updates merged, summed over the calls
	shared int // of those, the ones that came with their yjs.Shared
}

func countMerges(t *testing.T) *mergeCounter {
	mc := &mergeCounter{}
	orig := *namespace.MergeUpdates
	*namespace.MergeUpdates = func(us [][]byte, shared []*yjs.Shared) ([]byte, error) {
		mc.mu.Lock()
		mc.calls++
		mc.inputs += len(us)
		for i, s := range shared {
			if s != nil && &s.Bytes()[0] == &us[i][0] {
				mc.shared++
			}
		}
		mc.mu.Unlock()
		return orig(us, shared)
	}
	t.Cleanup(func() { *namespace.MergeUpdates = orig })
	return mc
}

func (mc *mergeCounter) sharedInputs() int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.shared
}

func (mc *mergeCounter) get() (calls, inputs int) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.calls, mc.inputs
}

// slowAcks makes every acknowledgement count as slow for the test: small updates fill
// coalesceInFlight slots of the window (4, the whole window of nsConfig) before they wait,
// as on a link with a long round trip, whatever the fake clock says.
func slowAcks(t *testing.T) {
	orig := *namespace.CoalesceQuickAck
	*namespace.CoalesceQuickAck = 0
	t.Cleanup(func() { *namespace.CoalesceQuickAck = orig })
}

// TestS10_1_CoalesceWhenTheWindowOpens: while the window is full, updates wait unmerged
// (merging at every new update would merge the merged one again and again); the
// acknowledgement that opens a slot merges them once into one UPDATE. A long backlog is
// merged only to keep the queue's count bounded, each update a bounded number of times,
// and never overflows the queue.
func TestS10_1_CoalesceWhenTheWindowOpens(t *testing.T) {
	slowAcks(t)
	cfg := nsConfig(t)
	cfg.MaxQueuedUpdateCount = 64
	must(t, cfg.Validate())
	mc := countMerges(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	local := newYDoc(t, 100)
	write := func(i int) { must(t, writeLocal(t, f.reg, ns, local.set("k", float64(i)))) }

	// Fill the window.
	var window []uint32
	for i := range cfg.MaxInFlightUpdates {
		write(i)
		up, seq := expect[*protocol.Update](w)
		doc.apply(up.Update)
		window = append(window, seq)
	}
	// Twelve more wait behind the full window, unmerged.
	for i := range 12 {
		write(100 + i)
	}
	w.quiet()
	if calls, _ := mc.get(); calls != 0 {
		t.Fatalf("%d merges while the window was full", calls)
	}
	// One acknowledgement: the twelve leave as one UPDATE, merged once.
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: window[0]})
	up, seq := expect[*protocol.Update](w)
	doc.apply(up.Update)
	if got := doc.app()["k"]; got != float64(111) {
		t.Fatalf("k = %v after the merged UPDATE, want 111", got)
	}
	if calls, inputs := mc.get(); calls != 1 || inputs != 12 {
		t.Fatalf("%d merges of %d updates, want 1 of 12", calls, inputs)
	}
	// Each came with the registry's yjs.Shared, which every receiver's merge reads once
	// for all.
	if n := mc.sharedInputs(); n != 12 {
		t.Fatalf("%d of the 12 merged updates came with their yjs.Shared", n)
	}
	window = append(window[1:], seq)
	w.quiet()

	// A backlog of 60 behind the full window: merged only under count pressure, each
	// update at most twice, and the queue never overflows.
	const backlog = 60
	for i := range backlog {
		write(200 + i)
	}
	w.quiet()
	calls, inputs := mc.get()
	calls, inputs = calls-1, inputs-12
	if calls == 0 || inputs > 2*backlog {
		t.Fatalf("backlog of %d: %d merges of %d updates in all, want some and at most %d", backlog, calls, inputs, 2*backlog)
	}
	for _, e := range f.rec.OfType(observer.TypeResyncRequired) {
		t.Fatalf("resync during the backlog: %+v", e)
	}
	// Acknowledge everything: what waited arrives, the document converges.
	for len(window) > 0 {
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: window[0]})
		window = window[1:]
		for _, fr := range w.barrier() {
			up, ok := fr.Message.(*protocol.Update)
			if !ok {
				t.Fatalf("unexpected %s", fr.Type())
			}
			doc.apply(up.Update)
			window = append(window, fr.Sequence)
		}
	}
	if got := doc.app()["k"]; got != float64(200+backlog-1) {
		t.Fatalf("k = %v at the end, want %d", got, 200+backlog-1)
	}
}

// wideWindow is a hub with a live namespace whose window (16) is wider than
// coalesceInFlight, a peer's end w and document doc on it, and local, a document the hub
// side writes from.
type wideWindow struct {
	t     *testing.T
	f     *nsHub
	w     *wire
	ns    protocol.NamespaceID
	doc   *ydoc
	local *ydoc
}

func newWideWindow(t *testing.T) *wideWindow {
	cfg := nsConfig(t)
	cfg.MaxInFlightUpdates = 16
	cfg.MaxUpdateBytes, cfg.MaxFrameBytes, cfg.MaxQueuedUpdateBytes = 4096, 8192, 64<<10
	cfg.MaxQueuedUpdateCount = 64
	must(t, cfg.Validate())
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	return &wideWindow{t: t, f: f, w: w, ns: ns, doc: doc, local: newYDoc(t, 100)}
}

// flow is the namespace's flow on its one connection.
func (ww *wideWindow) flow() ws.Flow {
	ww.t.Helper()
	fl := ww.f.hub.NamespaceFlows(ctxT(ww.t), ww.ns.String())
	if len(fl) != 1 {
		ww.t.Fatalf("%d connections carry the namespace", len(fl))
	}
	return fl[0]
}

// reached waits until n writes made after sentBefore UPDATEs had left have reached the
// connection — sent, or queued behind the UPDATEs in flight (a write's fan-out reaches
// the channel after the write returns).
func (ww *wideWindow) reached(sentBefore uint64, n int) {
	ww.t.Helper()
	testkit.Eventually(ww.t, wait, "the writes at the connection", func() bool {
		fl := ww.flow()
		return fl.UpdatesSent-sentBefore+uint64(fl.QueuedUpdates) >= uint64(n)
	})
}

// updates applies to doc every UPDATE a barrier brings back and returns their sequences;
// any other frame fails the test.
func (ww *wideWindow) updates() []uint32 {
	ww.t.Helper()
	var seqs []uint32
	for _, fr := range ww.w.barrier() {
		up, ok := fr.Message.(*protocol.Update)
		if !ok {
			ww.t.Fatalf("unexpected %s", fr.Type())
		}
		ww.doc.apply(up.Update)
		seqs = append(seqs, fr.Sequence)
	}
	return seqs
}

// TestS10_1_SmallUpdatesLeaveMergedPastAFewInFlight: with a wide window, small updates
// leave one by one only until a few UPDATEs are unacknowledged; the rest wait and leave as
// one merged UPDATE when an acknowledgement comes back — far fewer frames to write and to
// acknowledge. Large updates (merging costs more than it saves) use the whole window.
func TestS10_1_SmallUpdatesLeaveMergedPastAFewInFlight(t *testing.T) {
	slowAcks(t)
	ww := newWideWindow(t)
	f, w, ns, doc, local := ww.f, ww.w, ww.ns, ww.doc, ww.local

	for i := range 10 {
		must(t, writeLocal(t, f.reg, ns, local.set("k", float64(i))))
	}
	// Every write has reached the connection before the frames are collected and
	// acknowledged.
	ww.reached(0, 10)
	window := ww.updates()
	if len(window) > 4 {
		t.Fatalf("%d UPDATEs for 10 small writes before any acknowledgement, want at most 4", len(window))
	}
	// One acknowledgement: what waited leaves merged.
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: window[0]})
	after := 0
	for quiet := 0; doc.app()["k"] != float64(9) && quiet < 20; {
		got := ww.updates()
		if len(got) == 0 {
			quiet++
			time.Sleep(5 * time.Millisecond)
		}
		after += len(got)
	}
	if got := doc.app()["k"]; got != float64(9) || after > 2 {
		t.Fatalf("k = %v after %d UPDATEs following one acknowledgement, want 9 in one merged UPDATE", got, after)
	}

	// Large updates fill the window one by one.
	for i := range 6 {
		must(t, writeLocal(t, f.reg, ns, local.set(fmt.Sprintf("big%d", i), strings.Repeat("x", 2000))))
	}
	// The last writes' fan-out may still be on its way when a barrier comes back: read
	// until the six arrived (or a few barriers brought nothing more).
	n := 0
	for quiet := 0; n < 6 && quiet < 20; {
		got := 0
		for _, fr := range w.barrier() {
			if _, ok := fr.Message.(*protocol.Update); ok {
				got++
			}
		}
		if got == 0 {
			quiet++
			time.Sleep(5 * time.Millisecond)
		}
		n += got
	}
	if n != 6 {
		t.Fatalf("%d UPDATEs for 6 large writes with room in the window, want 6", n)
	}
}

// TestS10_1_QuickAcksKeepOneSmallUpdateInFlight: once UPDATEs are acknowledged quickly (the
// fake clock does not move: a round trip of zero), small updates wait behind a single one
// in flight and leave merged when it is acknowledged; after a slow acknowledgement (the
// clock moved a second between the UPDATE and its ACK) the average (an eighth of it: 125
// ms) is over the threshold and a few go out again before the rest wait.
func TestS10_1_QuickAcksKeepOneSmallUpdateInFlight(t *testing.T) {
	ww := newWideWindow(t)
	f, w, ns, doc, local := ww.f, ww.w, ww.ns, ww.doc, ww.local
	// burst writes n small updates and returns the UPDATEs sent before any is acknowledged.
	burst := func(from, n int) []uint32 {
		before := ww.flow().UpdatesSent
		for i := range n {
			must(t, writeLocal(t, f.reg, ns, local.set("k", float64(from+i))))
		}
		ww.reached(before, n)
		return ww.updates()
	}
	// ack acknowledges seq after the fake clock moved by rtt, and returns what it released.
	ack := func(seq uint32, rtt time.Duration) []uint32 {
		f.clk.Advance(rtt)
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
		return ww.updates()
	}

	// The first UPDATE and its quick acknowledgement.
	first := burst(0, 1)
	if len(first) != 1 {
		t.Fatalf("%d UPDATEs for one write", len(first))
	}
	if got := ack(first[0], 0); len(got) != 0 {
		t.Fatalf("%d UPDATEs released by the acknowledgement of the only one", len(got))
	}
	// Quick: one small UPDATE in flight, the other five wait.
	sent := burst(1, 6)
	if len(sent) != 1 {
		t.Fatalf("%d UPDATEs for 6 small writes after quick acknowledgements, want 1", len(sent))
	}
	// Its acknowledgement releases the five as one merged UPDATE; this one is slow.
	merged := ack(sent[0], time.Second)
	if len(merged) != 1 || doc.app()["k"] != float64(6) {
		t.Fatalf("%d UPDATEs after the acknowledgement, k = %v: want the five merged into one, k = 6", len(merged), doc.app()["k"])
	}
	// Slow now: four go before the rest wait.
	if got := ack(merged[0], time.Second); len(got) != 0 {
		t.Fatalf("%d UPDATEs released with nothing queued", len(got))
	}
	if sent := burst(7, 6); len(sent) != 4 {
		t.Fatalf("%d UPDATEs for 6 small writes after slow acknowledgements, want 4", len(sent))
	}
}
