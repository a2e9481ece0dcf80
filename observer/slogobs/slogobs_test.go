package slogobs_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/observer/slogobs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a slog handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

type line struct {
	keys []string
	vals map[string]any
}

// lines parses the JSON lines written so far.
func (s *syncBuffer) lines(t *testing.T) []line {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []line
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l.vals); err != nil {
			t.Fatalf("not a JSON line: %s", sc.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.Token()
		for dec.More() {
			k, _ := dec.Token()
			l.keys = append(l.keys, k.(string))
			var skip json.RawMessage
			dec.Decode(&skip)
		}
		out = append(out, l)
	}
	return out
}

func newLogger(every int) (*slogobs.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	h := slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slogobs.New(slog.New(h), slogobs.Options{SummaryEvery: every}), buf
}

// TestS23_6_OneStructuredLinePerEvent: each non-per-frame event is exactly one
// line whose attributes are the event's keys and values, in order.
func TestS23_6_OneStructuredLinePerEvent(t *testing.T) {
	l, buf := newLogger(1 << 20)
	var want []o.Event
	for _, s := range observertest.Samples() {
		for _, ev := range []o.Event{s.Full, s.Minimal} {
			l.Observe(ev)
			if !ev.Type().PerFrame() {
				want = append(want, ev)
			}
		}
	}
	got := buf.lines(t)
	if len(got) != len(want) || len(want) != 2*18 {
		t.Fatalf("wrote %d lines for %d non-per-frame events (want 36)", len(got), len(want))
	}
	for i, ev := range want {
		ln := got[i]
		if wantKeys := append([]string{"time", "level", "msg"}, ev.Keys()...); !slices.Equal(ln.keys, wantKeys) {
			t.Errorf("%s: line keys\n got %v\nwant %v", ev.Type(), ln.keys, wantKeys)
		}
		if ln.vals["msg"] != string(ev.Type()) {
			t.Errorf("%s: msg = %v", ev.Type(), ln.vals["msg"])
		}
		js, _ := json.Marshal(ev)
		var evVals map[string]any
		json.Unmarshal(js, &evVals)
		for k, v := range evVals {
			if gotV, ok := ln.vals[k]; !ok || !equalJSON(gotV, v) {
				t.Errorf("%s: %s = %v, want %v", ev.Type(), k, gotV, v)
			}
		}
	}
	levels := map[string]string{}
	for _, ln := range got {
		levels[ln.vals["type"].(string)] = ln.vals["level"].(string)
	}
	for typ, lvl := range map[string]string{"namespace-failed": "WARN", "connection-failed": "WARN",
		"resync-required": "WARN", "chunked-sync-aborted": "WARN", "schema-rearm-failed": "WARN",
		"channel-state-changed": "INFO", "schema-rearm-applied": "INFO", "goaway-received": "INFO"} {
		if levels[typ] != lvl {
			t.Errorf("%s logged at %s, want %s", typ, levels[typ], lvl)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestS23_6_PerFrameEventsAreAggregated: 10,000 update-applied events make ten
// summary lines, not 10,000 lines.
func TestS23_6_PerFrameEventsAreAggregated(t *testing.T) {
	l, buf := newLogger(1000)
	for i := range 10000 {
		l.Observe(o.Event{Side: o.SideHub, Payload: o.UpdateApplied{NamespaceID: observertest.SampleNamespaceID,
			Bytes: 10, Sequence: uint32(i + 1), ApplyLatencyMs: o.Some(float64(i % 1000))}})
	}
	got := buf.lines(t)
	if len(got) != 10 {
		t.Fatalf("wrote %d lines for 10000 per-frame events, want 10 summaries", len(got))
	}
	for _, ln := range got {
		if want := []string{"time", "level", "msg", "type", "side", "count", "bytesTotal", "maxMs"}; !slices.Equal(ln.keys, want) {
			t.Fatalf("summary keys %v, want %v", ln.keys, want)
		}
		if ln.vals["msg"] != slogobs.SummaryMessage || ln.vals["type"] != "update-applied" || ln.vals["side"] != "hub" ||
			ln.vals["count"] != 1000.0 || ln.vals["bytesTotal"] != 10000.0 || ln.vals["maxMs"] != 999.0 {
			t.Fatalf("summary %v", ln.vals)
		}
	}
	l.Flush() // the window is empty: nothing more
	if n := len(buf.lines(t)); n != 10 {
		t.Errorf("an empty Flush wrote %d lines", n-10)
	}
}

// TestS23_6_FlushWritesOneSummaryPerSideAndType covers every per-frame type and
// the keys a summary carries for each.
func TestS23_6_FlushWritesOneSummaryPerSideAndType(t *testing.T) {
	l, buf := newLogger(0)
	var perFrame []observertest.Sample
	for _, s := range observertest.Samples() {
		if s.Type.PerFrame() {
			perFrame = append(perFrame, s)
			l.Observe(s.Full)
			l.Observe(s.Minimal)
		}
	}
	if n := len(buf.lines(t)); n != 0 {
		t.Fatalf("per-frame events wrote %d lines before Flush", n)
	}
	l.Flush()
	got := buf.lines(t)
	if len(got) != len(perFrame) || len(perFrame) != 18 {
		t.Fatalf("Flush wrote %d summaries for %d per-frame types (want 18)", len(got), len(perFrame))
	}
	for i, s := range perFrame {
		ln := got[i]
		if ln.vals["type"] != string(s.Type) || ln.vals["count"] != 2.0 {
			t.Errorf("summary %d = %v, want type %s count 2", i, ln.vals, s.Type)
		}
		for _, k := range []string{"namespaceId", "connectionId", "sequence"} {
			if _, ok := ln.vals[k]; ok {
				t.Errorf("%s summary carries per-event key %s", s.Type, k)
			}
		}
		_, hasBytes := ln.vals["bytesTotal"]
		noBytes := s.Type == o.TypeSendPaused || s.Type == o.TypeSendResumed || s.Type == o.TypeEventLoopDelaySampled
		if hasBytes == noBytes {
			t.Errorf("%s summary: bytesTotal present=%v", s.Type, hasBytes)
		}
	}
	byType := map[string]map[string]any{}
	for _, ln := range got {
		byType[ln.vals["type"].(string)] = ln.vals
	}
	// Two chunked-update-sent samples of totalBytes 1200000; the loop delay's max of 12.25 and 0.
	if v := byType["chunked-update-sent"]["bytesTotal"]; v != 2400000.0 {
		t.Errorf("chunked-update-sent bytesTotal = %v", v)
	}
	if v := byType["event-loop-delay-sampled"]["maxMs"]; v != 12.25 {
		t.Errorf("event-loop-delay-sampled maxMs = %v", v)
	}
	if _, ok := byType["sync-step2-sent"]["maxMs"]; ok {
		t.Error("sync-step2-sent has no latency to report")
	}
}

func TestS23_6_ConcurrentObserve(t *testing.T) {
	l, buf := newLogger(97)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			side := o.Sides()[g%2]
			for i := range 500 {
				l.Observe(o.Event{Side: side, Payload: o.UpdateSent{NamespaceID: observertest.SampleNamespaceID, Bytes: 1, Sequence: uint32(i + 1)}})
				if i%100 == 0 {
					l.Observe(o.Event{Side: side, Payload: o.ChannelStateChanged{NamespaceID: observertest.SampleNamespaceID,
						From: o.ChannelReconciling, To: o.ChannelLive}})
				}
			}
		})
	}
	wg.Wait()
	l.Flush()
	counts := map[string]float64{}
	for _, ln := range buf.lines(t) {
		if ln.vals["msg"] == slogobs.SummaryMessage {
			counts[ln.vals["side"].(string)] += ln.vals["count"].(float64)
		} else {
			counts["lines"]++
		}
	}
	if counts["hub"] != 2000 || counts["peer"] != 2000 || counts["lines"] != 40 {
		t.Errorf("counts %v, want 2000 per side in summaries and 40 single lines", counts)
	}
}

func TestS23_6_DisabledLevelWritesNothing(t *testing.T) {
	buf := &syncBuffer{}
	l := slogobs.New(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelError})), slogobs.Options{})
	for _, s := range observertest.Samples() {
		l.Observe(s.Full)
	}
	l.Flush()
	if n := len(buf.lines(t)); n != 0 {
		t.Errorf("wrote %d lines below the handler's level", n)
	}
}

func BenchmarkObservePerFrame(b *testing.B) {
	l := slogobs.New(slog.New(slog.DiscardHandler), slogobs.Options{})
	ev := o.Event{Side: o.SideHub, Payload: o.UpdateApplied{NamespaceID: observertest.SampleNamespaceID, Bytes: 10, Sequence: 1,
		ApplyLatencyMs: o.Some(1.5)}}
	b.ReportAllocs()
	for b.Loop() {
		l.Observe(ev)
	}
}
