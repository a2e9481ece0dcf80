package observer_test

import (
	"slices"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// measureInputs returns every sample, full and minimal, on every side that may emit
// it, and the per-frame samples with their optional keys one at a time.
func measureInputs() []o.Event {
	var out []o.Event
	for _, s := range observertest.Samples() {
		for _, side := range o.Sides() {
			if !s.Type.EmittedBy(side) {
				continue
			}
			for _, ev := range []o.Event{s.Full, s.Minimal} {
				ev.Side = side
				out = append(out, ev)
			}
		}
	}
	stages := o.Some(o.Stages{QueueWaitMs: 1, ProtectedCheckMs: 2, LiveApplyMs: 3, DirtyNotifyMs: 4})
	for _, p := range []o.Payload{
		o.UpdateApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, Stages: stages},
		o.UpdateApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, ApplyLatencyMs: o.Some(0.0)},
		o.SyncDiffApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, Stages: stages},
		o.ChunkedSyncSent{NamespaceID: ns, TransferID: 1, ChunkCount: 1, TotalBytes: 1 << 31},
	} {
		out = append(out, o.Event{Side: o.SidePeer, Payload: p})
	}
	return out
}

// TestMeasuresFollowDescriptions: the measures of every event are those its
// description gives (the per-frame events are measured by hand, for speed), and
// TypeIndex is the position of its type in Types.
func TestMeasuresFollowDescriptions(t *testing.T) {
	types := o.Types()
	for _, ev := range measureInputs() {
		var got o.Measures
		ev.Measure(&got)
		want := o.MeasureDescribed(ev)
		if got.TypeIndex != want.TypeIndex || got.TypeIndex != slices.Index(types, ev.Type()) {
			t.Errorf("%s: TypeIndex %d, described %d", ev.Type(), got.TypeIndex, want.TypeIndex)
		}
		if got.Size != want.Size {
			t.Errorf("%s: Size %v, described %v", ev.Type(), got.Size, want.Size)
		}
		if got.Latency != want.Latency || (want.Latency.Present() && got.Timed != want.Timed) {
			t.Errorf("%s: Latency %v (%v), described %v (%v)", ev.Type(), got.Latency, got.Timed, want.Latency, want.Timed)
		}
		if got.Stages != want.Stages {
			t.Errorf("%s: Stages %v, described %v", ev.Type(), got.Stages, want.Stages)
		}
	}
	var none o.Measures
	o.Event{Side: o.SideHub}.Measure(&none)
	if none.TypeIndex != -1 || none.Size.Present() || none.Latency.Present() {
		t.Errorf("an event without payload measures %+v", none)
	}
}

// TestMeasuresOfSizesAndLatencies pins a few measures by hand.
func TestMeasuresOfSizesAndLatencies(t *testing.T) {
	for _, c := range []struct {
		p       o.Payload
		size    o.Opt[int]
		latency o.Opt[float64]
		timed   o.Duration
	}{
		{o.UpdateAcked{NamespaceID: ns, Bytes: 7, Sequence: 1, AckLatencyMs: o.Some(2.5)}, o.Some(7), o.Some(2.5), o.AckLatency},
		{o.ChunkedSnapshotSent{NamespaceID: ns, TransferID: 1, ChunkCount: 2, TotalBytes: 900}, o.Some(900), o.None[float64](), 0},
		{o.ConnectionBackoffScheduled{Attempt: 1, DelayMs: 40, Reason: o.BackoffDialFailed}, o.None[int](), o.Some(40.0), o.BackoffDelay},
		{o.BootstrapImported{NamespaceID: ns, Bytes: 12}, o.Some(12), o.None[float64](), 0},
		{o.UpdateDropped{NamespaceID: ns, Reason: o.DropUpdateTooLarge, QueueSample: o.QueueSample{UpdateBytes: 99, ChannelState: o.ChannelLive, ConnectionState: o.ConnReady}},
			o.None[int](), o.None[float64](), 0},
	} {
		var m o.Measures
		o.Event{Side: o.SidePeer, Payload: c.p}.Measure(&m)
		if m.Size != c.size || m.Latency != c.latency || (c.latency.Present() && m.Timed != c.timed) {
			t.Errorf("%s: measured size %v latency %v (%v)", c.p.Type(), m.Size, m.Latency, m.Timed)
		}
	}
}

// TestWords: the closed-vocabulary keys in documented order, folded where their
// vocabulary folds, and marked unknown otherwise.
func TestWords(t *testing.T) {
	for _, c := range []struct {
		ev   o.Event
		want []o.Word
	}{
		{o.Event{Side: o.SidePeer, Payload: o.NamespaceError{NamespaceID: ns, Code: "E_REMOTE", Direction: o.DirectionReceived, TerminalState: o.Some(o.TerminalFailed)}},
			[]o.Word{{"code", "INTERNAL_ERROR", true}, {"direction", "received", true}, {"terminalState", "failed", true}}},
		{o.Event{Side: o.SidePeer, Payload: o.GoAwayReceived{ReasonCode: "MAINTENANCE"}},
			[]o.Word{{"reasonCode", "other", true}}},
		{o.Event{Side: o.SideHub, Payload: o.ConnectionStateChanged{From: o.ConnBackoff, To: o.ConnReady}},
			[]o.Word{{"from", "backoff", false}, {"to", "ready", true}}},
		{o.Event{Side: o.SidePeer, Payload: o.NamespaceFailed{NamespaceID: ns, Cause: "cause-7"}},
			[]o.Word{{"cause", "cause-7", false}}},
		{o.Event{Side: o.SidePeer, Payload: o.UpdateApplied{NamespaceID: ns, Sequence: 1}}, nil},
	} {
		if got := c.ev.Words(nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: words %v, want %v", c.ev.Type(), got, c.want)
		}
	}
	for _, ev := range measureInputs() {
		if n := len(ev.Words(nil)); n >= o.MaxWords {
			t.Errorf("%s has %d words: Words keeps %d", ev.Type(), n, o.MaxWords)
		}
	}
}

// TestMeasureAllocatesNothing: measuring any event, or reading its words into room
// the caller has, allocates nothing — so every type has its case in the
// describer's walk.
func TestMeasureAllocatesNothing(t *testing.T) {
	var buf [o.MaxWords]o.Word
	for _, ev := range measureInputs() {
		if n := testing.AllocsPerRun(20, func() {
			var m o.Measures
			ev.Measure(&m)
			_ = ev.Words(buf[:0])
		}); n != 0 {
			t.Errorf("%s: %.1f allocations", ev.Type(), n)
		}
	}
}
