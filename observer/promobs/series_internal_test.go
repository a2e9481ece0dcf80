package promobs

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// TestPerFrameSeriesBoundOnce: the first per-frame event of a side and type binds its series;
// the next ones go through the bound series (still counted in the vectors the exposition
// reads), and other sides and types stay unbound.
func TestPerFrameSeriesBoundOnce(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ev := o.Event{Side: o.SideHub, Payload: o.UpdateSent{NamespaceID: observertest.SampleNamespaceID, Bytes: 100, Sequence: 1, SendQueueMs: o.Some(2.0)}}
	m.Observe(ev)
	fs := &m.types[slices.Index(o.Types(), o.TypeUpdateSent)].bound[0]
	if fs.events.p.Load() == nil || fs.size.p.Load() == nil || fs.durations[o.SendQueueWait].p.Load() == nil {
		t.Fatal("update-sent series not bound after its first event")
	}
	if fs.durations[o.ApplyLatency].p.Load() != nil || fs.durations[o.AckLatency].p.Load() != nil {
		t.Fatal("a latency series bound for an event without one")
	}
	bound := *fs.events.p.Load()
	m.Observe(ev)
	if *fs.events.p.Load() != bound {
		t.Fatal("rebound")
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("hub", "update-sent")); got != 2 {
		t.Fatalf("events_total{hub,update-sent} = %v, want 2", got)
	}
	if m.types[slices.Index(o.Types(), o.TypeUpdateSent)].bound[1].events.p.Load() != nil || m.types[slices.Index(o.Types(), o.TypeUpdateAcked)].bound[0].events.p.Load() != nil {
		t.Fatal("series bound for events never seen")
	}
}

// TestEveryDurationHasAHistogram: a latency or delay of any kind has a histogram
// to go to, and every type's size a histogram when the type has a content.
func TestEveryDurationHasAHistogram(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for d := range o.NumDurations {
		if m.durations[d].vec == nil {
			t.Errorf("duration %d has no histogram", d)
		}
	}
	for i, typ := range o.Types() {
		if (typ.Content() != o.ContentNone) != (m.types[i].size != nil) {
			t.Errorf("%s: content %d, size histogram %v", typ, typ.Content(), m.types[i].size)
		}
	}
}
