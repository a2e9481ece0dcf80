package timeline

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
)

const (
	nsA = "ns-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	nsB = "ns-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func channel(ns string, to observer.ChannelState) observer.Event {
	return observer.Event{Side: observer.SideHub, Payload: observer.ChannelStateChanged{
		ConnectionID: observer.Some("c1"), NamespaceID: ns, From: observer.ChannelOpening, To: to}}
}

func TestTotalsCountPerFrameEventsWithoutKeepingThem(t *testing.T) {
	tl := New(Options{Clock: clock.NewFake(time.Unix(100, 0))})
	hub := func(p observer.Payload) { tl.Observe(observer.Event{Side: observer.SideHub, Payload: p}) }
	hub(observer.UpdateSent{NamespaceID: nsA, Bytes: 10, Sequence: 1})
	hub(observer.UpdateSent{NamespaceID: nsA, Bytes: 5, Sequence: 2})
	hub(observer.ChunkedUpdateSent{NamespaceID: nsA, TransferID: 1, ChunkCount: 3, TotalBytes: 1000})
	hub(observer.UpdateApplied{NamespaceID: nsB, Bytes: 7, Sequence: 1})
	hub(observer.SyncDiffApplied{NamespaceID: nsB, Bytes: 3, Sequence: 2})
	hub(observer.UpdateAcked{NamespaceID: nsA, Bytes: 10, Sequence: 1})
	hub(observer.BootstrapSnapshotSent{NamespaceID: nsB, Bytes: 100})
	got := tl.Totals()
	want := Totals{UpdatesSent: 4, BytesSent: 1115, UpdatesReceived: 2, BytesReceived: 10, UpdatesAcked: 1}
	if got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	// Only the bootstrap is kept.
	p := tl.Events(0, "", 0)
	if len(p.Records) != 1 || p.Records[0].Event.Type() != observer.TypeBootstrapSnapshotSent || p.Records[0].NamespaceID != nsB {
		t.Fatalf("kept %+v", p.Records)
	}
}

func TestEventsPageFilterAndRing(t *testing.T) {
	clk := clock.NewFake(time.Unix(100, 0))
	tl := New(Options{Clock: clk, MaxEvents: 4})
	changed := tl.Changed()
	tl.Observe(channel(nsA, observer.ChannelLive)) // 1
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by a kept event")
	}
	clk.Advance(time.Second)
	tl.Observe(channel(nsB, observer.ChannelLive))       // 2
	tl.Observe(channel(nsA, observer.ChannelConflicted)) // 3
	p := tl.Events(0, nsA, 0)
	if len(p.Records) != 2 || p.Records[0].Seq != 1 || p.Records[1].Seq != 3 || p.Next != 4 || p.Missed != 0 {
		t.Fatalf("page %+v", p)
	}
	if p.Records[0].ConnectionID != "c1" || !p.Records[0].Time.Equal(time.Unix(100, 0)) {
		t.Fatalf("record %+v", p.Records[0])
	}
	p = tl.Events(1, "", 1)
	if len(p.Records) != 1 || p.Records[0].Seq != 2 || p.Next != 3 {
		t.Fatalf("limited page %+v", p)
	}
	// Overflow the ring: 4 kept of 7.
	for range 4 {
		tl.Observe(channel(nsB, observer.ChannelNeedsResync))
	}
	p = tl.Events(1, "", 0)
	if p.Missed != 2 || len(p.Records) != 4 || p.Records[0].Seq != 4 || p.Next != 8 {
		t.Fatalf("after overflow %+v (missed %d)", p.Records, p.Missed)
	}
	if p := tl.Events(7, "", 0); len(p.Records) != 0 || p.Next != 8 {
		t.Fatalf("caught-up page %+v", p)
	}
	if p := tl.Events(1000, "", 0); len(p.Records) != 0 || p.Next != 8 {
		t.Fatalf("a position from the future %+v", p)
	}
	latest := tl.Latest(2, "")
	if len(latest) != 2 || latest[0].Seq != 6 || latest[1].Seq != 7 {
		t.Fatalf("latest %+v", latest)
	}
	if l := tl.Latest(10, nsA); len(l) != 0 {
		t.Fatalf("nsA's events were pushed out of the ring, got %+v", l)
	}

	b, err := json.Marshal(latest[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"seq":7`, `"type":"channel-state-changed"`, `"namespaceId":"` + nsB + `"`, `"to":"needs-resync"`, `"time":"1970-01-01T00:01:41Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
}

func TestLinkAndConnections(t *testing.T) {
	clk := clock.NewFake(time.Unix(100, 0))
	tl := New(Options{Clock: clk})
	peer := func(p observer.Payload) { tl.Observe(observer.Event{Side: observer.SidePeer, Payload: p}) }
	peer(observer.ConnectionStateChanged{From: observer.ConnConnecting, To: observer.ConnBackoff})
	peer(observer.ConnectionBackoffScheduled{Attempt: 3, DelayMs: 250, Reason: observer.BackoffDialFailed})
	l := tl.Link()
	if l.State != observer.ConnBackoff || l.Backoff == nil || l.Backoff.Attempt != 3 || l.Backoff.Delay != 250*time.Millisecond {
		t.Fatalf("link %+v", l)
	}
	clk.Advance(time.Second)
	peer(observer.ConnectionFailed{Code: observer.ConnErrPongTimeout, WSCloseCode: 1011})
	peer(observer.ConnectionStateChanged{From: observer.ConnHandshaking, To: observer.ConnReady})
	l = tl.Link()
	if l.State != observer.ConnReady || l.Backoff != nil || !l.Since.Equal(time.Unix(101, 0)) || l.LastFailure != "PONG_TIMEOUT" {
		t.Fatalf("link %+v", l)
	}

	hub := func(p observer.Payload) { tl.Observe(observer.Event{Side: observer.SideHub, Payload: p}) }
	hub(observer.ConnectionStateChanged{ConnectionID: observer.Some("c9"), From: observer.ConnHandshaking, To: observer.ConnReady})
	if s, ok := tl.ConnectedSince("c9"); !ok || !s.Equal(time.Unix(101, 0)) {
		t.Fatalf("since %v %v", s, ok)
	}
	hub(observer.ConnectionStateChanged{ConnectionID: observer.Some("c9"), From: observer.ConnReady, To: observer.ConnClosed})
	if _, ok := tl.ConnectedSince("c9"); ok {
		t.Fatal("a closed connection is still tracked")
	}
}

// Observe runs on many connection goroutines at once; readers run on HTTP goroutines.
func TestConcurrentUse(t *testing.T) {
	tl := New(Options{MaxEvents: 16})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 200 {
				tl.Observe(channel(nsA, observer.ChannelLive))
				tl.Observe(observer.Event{Side: observer.SideHub, Payload: observer.UpdateSent{NamespaceID: nsA, Bytes: i, Sequence: 1}})
			}
		}()
		go func() {
			defer wg.Done()
			var next uint64
			for range 200 {
				p := tl.Events(next, "", 0)
				for j := 1; j < len(p.Records); j++ {
					if p.Records[j].Seq != p.Records[j-1].Seq+1 {
						t.Errorf("gap in a page: %d then %d", p.Records[j-1].Seq, p.Records[j].Seq)
					}
				}
				next = p.Next - 1
				tl.Totals()
			}
		}()
	}
	wg.Wait()
	if got := tl.Totals().UpdatesSent; got != 800 {
		t.Fatalf("updatesSent %d, want 800", got)
	}
	if tl.NextSeq() != 801 {
		t.Fatalf("next seq %d", tl.NextSeq())
	}
}

// The periodic sync rounds of a live channel are counted, not kept; a round that ends
// otherwise than live is kept from there on.
func TestRoutineSyncRoundsAreCountedNotKept(t *testing.T) {
	tl := New(Options{})
	step := func(conn string, from, to observer.ChannelState) {
		tl.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.ChannelStateChanged{
			ConnectionID: observer.Some(conn), NamespaceID: nsA, From: from, To: to}})
	}
	step("c1", observer.ChannelBootstrapping, observer.ChannelReconciling) // kept
	step("c1", observer.ChannelReconciling, observer.ChannelLive)          // kept: not a round of a live channel
	step("c1", observer.ChannelLive, observer.ChannelReconciling)          // round
	step("c2", observer.ChannelReconciling, observer.ChannelLive)          // kept: another connection's
	step("c1", observer.ChannelReconciling, observer.ChannelLive)          // end of the round
	step("c1", observer.ChannelLive, observer.ChannelReconciling)          // round
	step("c1", observer.ChannelReconciling, observer.ChannelNeedsResync)   // kept: it went wrong
	var kept []string
	for _, r := range tl.Events(0, "", 0).Records {
		p := r.Event.Payload.(observer.ChannelStateChanged)
		kept = append(kept, p.ConnectionID.Or("")+":"+string(p.From)+">"+string(p.To))
	}
	want := "c1:bootstrapping>reconciling c1:reconciling>live c2:reconciling>live c1:reconciling>needs-resync"
	if got := strings.Join(kept, " "); got != want {
		t.Fatalf("kept %s\nwant %s", got, want)
	}
	if n := tl.Totals().SyncRounds; n != 2 {
		t.Fatalf("sync rounds %d, want 2", n)
	}
	if len(tl.rounds) != 0 {
		t.Fatalf("rounds left open: %v", tl.rounds)
	}
}
