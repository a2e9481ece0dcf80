package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/webhook"
)

// readFeed reads node's change feed after cursor after up to what the streams held when it
// opened (and whatever came meanwhile).
func readFeed(t *testing.T, node *Node, after changefeed.Cursor) []changefeed.Event {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	r, err := node.ChangeFeed().Open(ctx, after)
	if err != nil {
		t.Fatalf("%s: opening the feed after %q: %v", node.Name(), after, err)
	}
	defer r.Close()
	var out []changefeed.Event
	for {
		evs, err := r.Next(ctx, 7) // small pages: the cursors between pages count too
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
	}
}

// eventKey names a change by what it is and where its record is.
func eventKey(e changefeed.Event) string {
	return fmt.Sprintf("%s %s @%d", e.Kind, e.NamespaceID, e.Pos)
}

func eventKeys(es []changefeed.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = eventKey(e)
	}
	slices.Sort(out)
	return out
}

// spreadNamespaces creates namespaces through the nodes until every one of streams log
// streams holds at least one, and returns the log stream of each.
func spreadNamespaces(t *testing.T, tc *testCluster, streams int) map[string]int {
	t.Helper()
	streamOf := map[string]int{}
	held := map[int]bool{}
	for i := 0; len(held) < streams; i++ {
		if i == 60 {
			t.Fatalf("60 namespaces and only streams %v hold one", held)
		}
		ns := tc.nodes[i%len(tc.nodes)].create(t)
		k, err := tc.nodes[0].node.logStreamOf(ctxT(t, 5*time.Second), ns)
		if err != nil {
			t.Fatal(err)
		}
		streamOf[ns], held[k] = k, true
	}
	return streamOf
}

// checkFeedOrder checks what a reader read from the start of the feed: every namespace's
// changes in its log's order, its creation first, at least updates of it; each cursor
// the one before it moved in the change's stream only, to the change's position.
func checkFeedOrder(t *testing.T, all []changefeed.Event, streamOf map[string]int, updates int) {
	t.Helper()
	var prev feedPos
	last := map[string]changefeed.Event{}
	count := map[string]int{}
	for i, e := range all {
		k, ok := streamOf[e.NamespaceID]
		if !ok {
			t.Fatalf("change %d: %s of a namespace never created", i, eventKey(e))
		}
		p, err := parseFeedCursor(string(e.Cursor))
		if err != nil {
			t.Fatalf("change %d: cursor %q: %v", i, e.Cursor, err)
		}
		for j := range max(len(p), len(prev), k+1) {
			want := prev.at(j)
			if j == k {
				want = e.Pos
				if e.Pos <= prev.at(j) {
					t.Fatalf("change %d (%s): position %d in stream %d after %d", i, eventKey(e), e.Pos, k, prev.at(j))
				}
			}
			if p.at(j) != want {
				t.Fatalf("change %d (%s): cursor %s after %s", i, eventKey(e), e.Cursor, prev.cursor())
			}
		}
		prev = p
		if l, ok := last[e.NamespaceID]; ok {
			if e.Pos <= l.Pos || e.Kind == persistence.ChangeCreated {
				t.Fatalf("%s after %s", eventKey(e), eventKey(l))
			}
		} else if e.Kind != persistence.ChangeCreated {
			t.Fatalf("the first change of %s: %s", e.NamespaceID, eventKey(e))
		}
		last[e.NamespaceID] = e
		if e.Kind == persistence.ChangeUpdated {
			count[e.NamespaceID]++
		}
	}
	for ns := range streamOf {
		if count[ns] < updates {
			t.Fatalf("%s: %d updates in the feed, want at least %d", ns, count[ns], updates)
		}
	}
}

// TestCluster_FeedAcrossLogStreams: the change feed of a cluster whose namespaces are in
// three log streams has every namespace's changes, in order; resuming after any change's
// cursor on another node gives exactly the changes after it; a plain number, the cursor of
// before, is a position in NOMICORE_LOG; garbage and cursors never given are refused.
func TestCluster_FeedAcrossLogStreams(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.LogStreams = 3 })
	streamOf := spreadNamespaces(t, tc, 3)
	for ns := range streamOf {
		for j := range 2 {
			l := tc.nodes[j].open(t, ns)
			if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "k"+strconv.Itoa(j), true)); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := readFeed(t, tc.nodes[0].node, "c1.0")
	checkFeedOrder(t, all, streamOf, 2)
	if got := eventKeys(readFeed(t, tc.nodes[2].node, "0")); !slices.Equal(got, eventKeys(all)) {
		t.Fatalf("from the start on n3:\n%v\nwant\n%v", got, eventKeys(all))
	}

	// Resumed on the other nodes after any change: exactly the changes after it.
	for _, i := range []int{0, 1, len(all) / 3, len(all) / 2, len(all) - 2, len(all) - 1} {
		tn := tc.nodes[1+i%2]
		got := readFeed(t, tn.node, all[i].Cursor)
		if g, w := eventKeys(got), eventKeys(all[i+1:]); !slices.Equal(g, w) {
			t.Fatalf("%s after change %d (%s):\n%v\nwant\n%v", tn.name, i, all[i].Cursor, g, w)
		}
	}

	// A plain number: that position in NOMICORE_LOG, every other stream from its start.
	var in0 []changefeed.Event
	for _, e := range all {
		if streamOf[e.NamespaceID] == 0 {
			in0 = append(in0, e)
		}
	}
	mid := in0[len(in0)/2].Pos
	var want []changefeed.Event
	for _, e := range all {
		if streamOf[e.NamespaceID] != 0 || e.Pos > mid {
			want = append(want, e)
		}
	}
	if got := readFeed(t, tc.nodes[1].node, changefeed.Cursor(strconv.FormatUint(mid, 10))); !slices.Equal(eventKeys(got), eventKeys(want)) {
		t.Fatalf("after the plain cursor %d:\n%v\nwant\n%v", mid, eventKeys(got), eventKeys(want))
	}
	if c, err := tc.nodes[1].node.ChangeFeed().ParseCursor(strconv.FormatUint(mid, 10)); err != nil || c != (feedPos{mid}).cursor() {
		t.Fatalf("ParseCursor(%d) = %q, %v", mid, c, err)
	}

	// Refused: garbage (400 in the API), and cursors the feed never gave (410).
	feed := tc.nodes[2].node.ChangeFeed()
	ctx := ctxT(t, 10*time.Second)
	for _, bad := range []changefeed.Cursor{"garbage", "c2.1", "c1.1..2", "-3"} {
		if _, err := feed.ParseCursor(string(bad)); !errors.Is(err, changefeed.ErrBadCursor) {
			t.Errorf("ParseCursor(%q): %v", bad, err)
		}
		if _, err := feed.Open(ctx, bad); !errors.Is(err, changefeed.ErrBadCursor) {
			t.Errorf("Open(%q): %v", bad, err)
		}
	}
	head, err := feed.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hp, _ := parseFeedCursor(string(head))
	for _, never := range []feedPos{{hp.at(0), hp.at(1), hp.at(2) + 1000}, {0, 0, 0, 5}} {
		_, err := feed.Open(ctx, never.cursor())
		var exp *changefeed.ExpiredError
		if !errors.As(err, &exp) || !exp.Newer {
			t.Errorf("Open(%s) past the head %s: %v", never.cursor(), head, err)
		}
	}

	// After the head: only what comes next, in each stream.
	r, err := tc.nodes[1].node.ChangeFeed().Open(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if evs, err := r.Next(ctx, 100); err != nil || len(evs) != 0 {
		t.Fatalf("after the head: %v, %v", evs, err)
	}
	for ns, k := range streamOf {
		wake := r.Wake()
		l := tc.nodes[0].open(t, ns)
		if _, err := l.WriteLocal(ctx, mapUpdate(t, nil, "late", true)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("no wake for a write in stream %d", k)
		}
		var evs []changefeed.Event
		eventually(t, 10*time.Second, "the write in the feed", func() error {
			more, err := r.Next(ctx, 100)
			evs = append(evs, more...)
			if err != nil || len(evs) == 0 {
				return fmt.Errorf("%v, %v", evs, err)
			}
			return nil
		})
		if len(evs) != 1 || evs[0].NamespaceID != ns || evs[0].Kind != persistence.ChangeUpdated {
			t.Fatalf("after a write to %s (stream %d): %v", ns, k, evs)
		}
	}
}

// TestCluster_FeedFollowsLaterStream: a reader opened when the cluster had one log stream
// gets the changes of a stream a node started with more created after.
func TestCluster_FeedFollowsLaterStream(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.LogStreams = 1 })
	ctx := ctxT(t, 60*time.Second)
	feed := tc.nodes[0].node.ChangeFeed()
	head, err := feed.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := feed.Open(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := tc.nodes[0].node.js.Stream(ctx, logStreamName(1)); err == nil {
		t.Fatal("a one-stream cluster has a second stream")
	}
	tc.stop(2)
	tc.tune = func(c *Config) { c.LogStreams = 3 }
	tn := tc.start(2)
	tc.waitHealthy(30*time.Second, tc.nodes...)
	eventually(t, 30*time.Second, tn.name+" ready", tn.node.Ready)
	var ns string
	k := 0
	for i := 0; k == 0; i++ {
		if i == 30 {
			t.Fatal("30 namespaces, all in NOMICORE_LOG")
		}
		ns = tn.create(t)
		if k, err = tn.node.logStreamOf(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tn.open(t, ns).WriteLocal(ctx, mapUpdate(t, nil, "x", 1.0)); err != nil {
		t.Fatal(err)
	}
	var got []changefeed.Event
	eventually(t, 30*time.Second, "the new stream's changes in the reader opened before it", func() error {
		evs, err := r.Next(ctx, 100)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.NamespaceID == ns {
				got = append(got, e)
			}
		}
		if len(got) < 2 {
			return fmt.Errorf("%d changes of %s (stream %d)", len(got), ns, k)
		}
		return nil
	})
	if got[0].Kind != persistence.ChangeCreated || got[1].Kind != persistence.ChangeUpdated {
		t.Fatalf("changes of %s: %v", ns, eventKeys(got))
	}
	p, err := parseFeedCursor(string(got[1].Cursor))
	if err != nil || p.at(k) != got[1].Pos {
		t.Fatalf("cursor %q of a change in stream %d at %d: %v", got[1].Cursor, k, got[1].Pos, err)
	}
	// Resumed on a node with one log stream configured: the change after the creation.
	rest := readFeed(t, tc.nodes[1].node, got[0].Cursor)
	if keys := eventKeys(rest); !slices.Contains(keys, eventKey(got[1])) || slices.Contains(keys, eventKey(got[0])) {
		t.Fatalf("after %s on n2: %v", got[0].Cursor, keys)
	}
}

// TestCluster_WebhookAcrossLogStreams: a webhook endpoint gets every change of namespaces
// in three log streams; delivery stopped on one node and started on another goes on after
// the endpoint's saved cursor, with every later change and none delivered before.
func TestCluster_WebhookAcrossLogStreams(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.LogStreams = 3 })
	secret := []byte("0123456789abcdef0123456789abcdef")
	var mu sync.Mutex // guards got
	var got []webhook.Body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body webhook.Body
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
	}))
	defer srv.Close()
	// deliver delivers from tn until stop, which returns once the endpoint's cursor is
	// saved after the last delivery the receiver got (delivery is at least once: a stop
	// between a 2xx and the save would deliver that change again).
	deliver := func(tn *testNode) (stop func()) {
		d, err := webhook.New(webhook.Options{URLs: []string{srv.URL}, Secret: secret, Debounce: -1, Feed: tn.node.ChangeFeed(), Config: tn.store})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		eventually(t, 20*time.Second, "the endpoint idle", func() error {
			if s := d.Status(); len(s) != 1 || s[0].Cursor == "" {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		return func() {
			eventually(t, 20*time.Second, "the endpoint's cursor saved", func() error {
				mu.Lock()
				last := got[len(got)-1].Cursor
				mu.Unlock()
				if s := d.Status(); s[0].Cursor != last || s[0].Pending != 0 {
					return fmt.Errorf("status %+v, last delivered %s", s[0], last)
				}
				return nil
			})
			cancel()
			<-done
		}
	}
	created := func(from []webhook.Body) map[string]bool {
		out := map[string]bool{}
		for _, b := range from {
			if b.Kind == "created" {
				out[b.NamespaceID] = true
			}
		}
		return out
	}
	waitCreated := func(want map[string]int) {
		eventually(t, 30*time.Second, "every creation delivered", func() error {
			mu.Lock()
			defer mu.Unlock()
			c := created(got)
			for ns := range want {
				if !c[ns] {
					return fmt.Errorf("%s (stream %d) not delivered yet", ns, want[ns])
				}
			}
			return nil
		})
	}
	stop := deliver(tc.nodes[0])
	first := spreadNamespaces(t, tc, 3)
	waitCreated(first)
	stop()
	mu.Lock()
	before := len(got)
	seen := map[string]bool{}
	for _, b := range got {
		seen[b.Cursor] = true
	}
	mu.Unlock()

	// Written while nobody delivers; then delivered from n2, after the saved cursor.
	second := spreadNamespaces(t, tc, 3)
	stop = deliver(tc.nodes[1])
	waitCreated(second)
	stop()
	mu.Lock()
	later := got[before:]
	if c := created(later); len(c) != len(second) {
		t.Fatalf("after the move: creations of %v, want %v", c, second)
	}
	for _, b := range later {
		if _, old := first[b.NamespaceID]; seen[b.Cursor] || old && b.Kind == "created" {
			t.Fatalf("delivered again after the move: %+v", b)
		}
		if _, err := parseFeedCursor(b.Cursor); err != nil {
			t.Fatalf("delivery cursor %q: %v", b.Cursor, err)
		}
	}
	mark := len(got)
	mu.Unlock()

	// The endpoint's cursor as an earlier version saved it, a plain number: that position
	// in NOMICORE_LOG, and every other stream from its start.
	info, err := tc.nodes[0].node.res.stream.Info(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tc.nodes[0].store.ConfigKeys(ctxT(t, 5*time.Second), "webhooks/")
	if err != nil || len(keys) != 1 {
		t.Fatalf("the endpoint's cursor: %v %v", keys, err)
	}
	old := strconv.FormatUint(info.State.LastSeq, 10)
	if err := tc.nodes[0].store.PutConfig(ctxT(t, 5*time.Second), keys[0], []byte(old)); err != nil {
		t.Fatal(err)
	}
	// A read may be answered by any copy of the bucket: wait until n3's give the value.
	fresh := 0
	eventually(t, 10*time.Second, "n3 reads the saved cursor", func() error {
		b, err := tc.nodes[2].store.Config(ctxT(t, 5*time.Second), keys[0])
		if err != nil || string(b) != old {
			fresh = 0
			return fmt.Errorf("%q, %v", b, err)
		}
		if fresh++; fresh < 5 {
			return errors.New("once")
		}
		return nil
	})
	elsewhere := map[string]int{}
	for _, m := range []map[string]int{first, second} {
		for ns, k := range m {
			if k != 0 {
				elsewhere[ns] = k
			}
		}
	}
	stop = deliver(tc.nodes[2])
	defer stop()
	eventually(t, 30*time.Second, "the other streams delivered from their start", func() error {
		mu.Lock()
		defer mu.Unlock()
		c := created(got[mark:])
		for ns := range elsewhere {
			if !c[ns] {
				return fmt.Errorf("%s (stream %d) not delivered again", ns, elsewhere[ns])
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for ns := range created(got[mark:]) {
		if _, ok := elsewhere[ns]; !ok {
			t.Fatalf("%s, in NOMICORE_LOG before the saved position, delivered again", ns)
		}
	}
}
