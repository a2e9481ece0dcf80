package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// changeJSON is one change of GET /v1/changes as an application reads it.
type changeJSON struct {
	Cursor      string `json:"cursor"`
	NamespaceID string `json:"namespaceId"`
	Kind        string `json:"kind"`
	StateVector string `json:"stateVector"`
	At          string `json:"at"`
}

type changesPage struct {
	Changes []changeJSON `json:"changes"`
	Cursor  string       `json:"cursor"`
}

// feedConsumer follows GET /v1/changes?after=CURSOR&wait= of one node (or, after
// moveTo, another), as an application does: it keeps the cursor of the last change it
// got and asks again from there, whatever happens to the node. It keeps, per namespace
// and Yjs client, the highest clock the state vectors of the changes showed.
type feedConsumer struct {
	t      *testing.T
	client *http.Client

	mu      sync.Mutex // guards the fields below
	base    string
	cursor  string
	events  int
	kinds   map[string]int
	covered map[string]yjs.StateVector // namespace → the union of its changes' state vectors
	bad     error                      // a change out of order or unreadable
}

func newFeedConsumer(t *testing.T, base string, after string) *feedConsumer {
	return &feedConsumer{t: t, client: &http.Client{Timeout: 15 * time.Second}, base: base, cursor: after,
		kinds: map[string]int{}, covered: map[string]yjs.StateVector{}}
}

// poll asks once; it returns false when the node did not answer (down, restarting).
func (f *feedConsumer) poll(ctx context.Context) bool {
	f.mu.Lock()
	url := fmt.Sprintf("%s/v1/changes?after=%s&wait=2s", f.base, f.cursor)
	f.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := f.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode == 503 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if resp.StatusCode != 200 {
		f.bad = fmt.Errorf("GET %s = %d %s", url, resp.StatusCode, b)
		return true
	}
	var page changesPage
	if err := json.Unmarshal(b, &page); err != nil {
		f.bad = fmt.Errorf("GET %s: %v", url, err)
		return true
	}
	for _, c := range page.Changes {
		f.add(c)
	}
	return true
}

// add takes one change (f.mu held).
func (f *feedConsumer) add(c changeJSON) {
	if err := cursorGrows(f.cursor, c.Cursor); err != nil {
		f.bad = fmt.Errorf("change %+v after cursor %s: cursors must grow: %v", c, f.cursor, err)
		return
	}
	f.cursor = c.Cursor
	f.events++
	f.kinds[c.Kind]++
	if c.StateVector == "" {
		return
	}
	raw, err := hex.DecodeString(c.StateVector)
	if err == nil {
		var sv yjs.StateVector
		if sv, err = yjs.DecodeStateVector(raw); err == nil {
			cov := f.covered[c.NamespaceID]
			if cov == nil {
				cov = yjs.StateVector{}
				f.covered[c.NamespaceID] = cov
			}
			for client, clock := range sv {
				cov[client] = max(cov[client], clock)
			}
		}
	}
	if err != nil {
		f.bad = fmt.Errorf("change %+v: state vector: %v", c, err)
	}
}

// cursorPositions reads a cursor as the feeds write them (docs/operations.md): a single
// hub's decimal number, or a hub cluster's "c1." and its position in each log stream (a
// plain number there is a position in the first).
func cursorPositions(c string) ([]uint64, error) {
	fields := []string{c}
	if rest, ok := strings.CutPrefix(c, "c1."); ok {
		fields = strings.Split(rest, ".")
	}
	out := make([]uint64, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cursor %q: %v", c, err)
		}
		out[i] = v
	}
	return out, nil
}

// cursorCompare tells how next stands to prev: ahead in some log stream, behind in some.
func cursorCompare(prev, next string) (ahead, behind bool, err error) {
	p, err := cursorPositions(prev)
	if err != nil {
		return false, false, err
	}
	n, err := cursorPositions(next)
	if err != nil {
		return false, false, err
	}
	for i := range max(len(p), len(n)) {
		var a, b uint64
		if i < len(p) {
			a = p[i]
		}
		if i < len(n) {
			b = n[i]
		}
		ahead, behind = ahead || b > a, behind || b < a
	}
	return ahead, behind, nil
}

// cursorGrows: next is after prev in one reader's order — ahead in some log stream and
// behind in none (on a single hub: a larger number).
func cursorGrows(prev, next string) error {
	ahead, behind, err := cursorCompare(prev, next)
	if err == nil && (!ahead || behind) {
		err = fmt.Errorf("%s does not follow %s", next, prev)
	}
	return err
}

// run polls until ctx ends.
func (f *feedConsumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !f.poll(ctx) {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// ackedWrite is a write the hub acknowledged (204): its namespace, and the Yjs client and
// clock a change's state vector must reach to stand for it.
type ackedWrite struct {
	ns     string
	client uint64
	clock  uint64
}

// missing returns the acknowledged writes no change received stands for.
func (f *feedConsumer) missing(acks []ackedWrite) []ackedWrite {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ackedWrite
	for _, a := range acks {
		if f.covered[a.ns][a.client] < a.clock {
			out = append(out, a)
		}
	}
	return out
}

// feedWriter writes to its namespaces through POST …/update as an application keeping its
// own copy of each document does: each write is the next change of its copy (client id of
// its own), sent again until the hub acknowledges it — a write whose answer was lost to a
// kill may have been taken or not; Yjs applies it once either way.
type feedWriter struct {
	base   string
	client *http.Client
	docs   map[string]*yjs.Doc
	nss    []string
}

func newFeedWriter(base string, clientBase uint32, nss []string) *feedWriter {
	w := &feedWriter{base: base, client: &http.Client{Timeout: 15 * time.Second}, docs: map[string]*yjs.Doc{}, nss: nss}
	for i, ns := range nss {
		w.docs[ns] = yjs.NewDoc(yjs.WithClientID(clientBase + uint32(i)))
	}
	return w
}

// write makes the i-th write to ns and returns once it is acknowledged (or ctx ends).
func (w *feedWriter) write(ctx context.Context, ns string, i int) (ackedWrite, bool) {
	doc := w.docs[ns]
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	doc.Transact(nil, func(*yjs.Transaction) { doc.GetMap("notes").Set(fmt.Sprintf("k%d", i%50), float64(i)) })
	unsub()
	a := ackedWrite{ns: ns, client: doc.ClientID(), clock: doc.StateVector()[doc.ClientID()]}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "POST", w.base+"/v1/namespaces/"+ns+"/update", strings.NewReader(string(update)))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := w.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 204 {
				return a, true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, false
}

// TestE2E_ChangeFeed_KillNine: a consumer follows the change feed by its cursor while two
// writers write to four namespaces and the hub is killed (SIGKILL) and restarted 20 times:
// for every write the hub acknowledged, the consumer received a change of its namespace
// whose state vector includes it — no gap across the kills — and the cursors it got only
// grew.
func TestE2E_ChangeFeed_KillNine(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	hub := c.startHub()
	var nss []string
	for range 4 {
		nss = append(nss, hub.api().createNamespace())
	}
	consumer := newFeedConsumer(t, hub.admin, "0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { consumer.run(ctx) })

	var mu sync.Mutex
	var acks []ackedWrite
	writeCtx, stopWriting := context.WithCancel(ctx)
	var writes atomic.Int64
	for wi := range 2 {
		w := newFeedWriter(hub.admin, uint32(1000+10*wi), nss[2*wi:2*wi+2])
		wg.Go(func() {
			for i := 0; writeCtx.Err() == nil; i++ {
				ns := w.nss[i%len(w.nss)]
				if a, ok := w.write(writeCtx, ns, i); ok {
					mu.Lock()
					acks = append(acks, a)
					mu.Unlock()
					writes.Add(1)
				}
			}
		})
	}
	const kills = 20
	start := time.Now()
	for k := range kills {
		time.Sleep(time.Duration(700+rand.IntN(800)) * time.Millisecond)
		before := writes.Load()
		hub.kill()
		c.startHub()
		t.Logf("kill %d: %d writes acknowledged so far (%d since the previous kill)", k+1, writes.Load(), writes.Load()-before)
	}
	time.Sleep(time.Second)
	stopWriting()
	mu.Lock()
	all := append([]ackedWrite(nil), acks...)
	mu.Unlock()
	if len(all) < 200 {
		t.Fatalf("only %d writes were acknowledged across the kills", len(all))
	}
	eventually(t, 30*time.Second, "a change for every acknowledged write", func() error {
		if m := consumer.missing(all); len(m) > 0 {
			return fmt.Errorf("%d of %d acknowledged writes have no change (first: %+v)", len(m), len(all), m[0])
		}
		return nil
	})
	cancel()
	wg.Wait()
	consumer.mu.Lock()
	defer consumer.mu.Unlock()
	if consumer.bad != nil {
		t.Fatal(consumer.bad)
	}
	if consumer.kinds["created"] != len(nss) {
		t.Errorf("%d created changes, want %d: %v", consumer.kinds["created"], len(nss), consumer.kinds)
	}
	t.Logf("%d kills in %v: %d acknowledged writes, %d changes received (%v)", kills, time.Since(start).Round(time.Second), len(all), consumer.events, consumer.kinds)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, event, data string
}

// readSSE reads events from an event stream until n were read, the stream ends, or ctx
// ends.
func readSSE(ctx context.Context, t *testing.T, url, lastEventID string, n int) []sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %s %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// TestE2E_ChangeFeed_StreamResumeAndRetention: the feed as server-sent events carries each
// change's cursor as its id, and a client reconnecting with Last-Event-ID gets the changes
// after it and no other; a cursor older than the feed keeps (--changes-max-records) is 410
// CURSOR_EXPIRED with the newest change of every namespace and the cursor to follow from,
// and following from there works.
func TestE2E_ChangeFeed_StreamResumeAndRetention(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	hub := c.startHub("--changes-max-records", "20")
	a := hub.api()
	ns := a.createNamespace()
	for i := range 3 {
		a.set(ns, map[string]any{"k": float64(i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs := readSSE(ctx, t, hub.admin+"/v1/changes?after=0", "", 4)
	if len(evs) != 4 || evs[0].id != "1" {
		t.Fatalf("the stream from the start gave %+v; want created then 3 updated, ids from 1", evs)
	}
	var first changeJSON
	if err := json.Unmarshal([]byte(evs[0].data), &first); err != nil || first.Kind != "created" || first.NamespaceID != ns || first.Cursor != evs[0].id {
		t.Fatalf("first event %+v (%v)", evs[0], err)
	}
	// Reconnecting as an EventSource does: the URL it started with, and the last id it got.
	a.set(ns, map[string]any{"k": 10.0})
	resumed := readSSE(ctx, t, hub.admin+"/v1/changes?after=0", evs[1].id, 3)
	if len(resumed) != 3 || resumed[0].id != evs[2].id || resumed[1].id != evs[3].id {
		t.Fatalf("resumed after %s: %+v; want the changes after it (%s, %s, then the new one)", evs[1].id, resumed, evs[2].id, evs[3].id)
	}
	var last changeJSON
	if err := json.Unmarshal([]byte(resumed[2].data), &last); err != nil || last.Kind != "updated" || last.StateVector == "" {
		t.Fatalf("the new change: %+v (%v)", resumed[2], err)
	}
	// Retention: many more changes than are kept; cursor 1 is gone.
	for i := range 30 {
		a.set(ns, map[string]any{"k": float64(100 + i)})
	}
	status, b := a.do("GET", "/v1/changes?after=1&wait=1s", nil)
	var expired struct {
		Code       string       `json:"code"`
		Cursor     string       `json:"cursor"`
		Namespaces []changeJSON `json:"namespaces"`
	}
	if err := json.Unmarshal(b, &expired); status != 410 || err != nil || expired.Code != "CURSOR_EXPIRED" || len(expired.Namespaces) != 1 ||
		expired.Namespaces[0].NamespaceID != ns || expired.Cursor == "" {
		t.Fatalf("an expired cursor: %d %s", status, b)
	}
	a.set(ns, map[string]any{"after": "expiry"})
	var page changesPage
	a.json("GET", "/v1/changes?after="+expired.Cursor+"&wait=5s", nil, 200, &page)
	if len(page.Changes) != 1 || page.Changes[0].NamespaceID != ns || page.Changes[0].Kind != "updated" {
		t.Fatalf("following from the cursor of the 410: %+v", page)
	}
	// A long poll with nothing new waits, then answers with no change and the same cursor.
	t0 := time.Now()
	a.json("GET", "/v1/changes?after="+page.Cursor+"&wait=1s", nil, 200, &page)
	if len(page.Changes) != 0 || time.Since(t0) < 900*time.Millisecond {
		t.Fatalf("an idle long poll: %+v after %v", page, time.Since(t0))
	}
}

// moveTo makes the consumer follow another node's feed, with the cursor it has.
func (f *feedConsumer) moveTo(base string) {
	f.mu.Lock()
	f.base = base
	f.mu.Unlock()
}

// feedCursors reads a node's whole feed after cursor 0 up to its head (long polls until
// one comes back empty) and returns the cursor of every namespace's creation and of its
// last update (a page coalesces the updates of a namespace into its last).
func feedCursors(t *testing.T, p *proc) map[string]string {
	t.Helper()
	out := map[string]string{}
	after := "0"
	for {
		var page changesPage
		p.api().json("GET", "/v1/changes?after="+after+"&wait=0s", nil, 200, &page)
		if len(page.Changes) == 0 {
			return out
		}
		for _, c := range page.Changes {
			out[c.Kind+" "+c.NamespaceID] = c.Cursor
		}
		after = page.Cursor
	}
}

// TestE2E_ChangeFeed_ClusterResume: on a hub cluster of three nodes, a consumer follows
// node 1's feed while both node 1 and node 2 take writes; node 1 is killed (SIGKILL), and
// the consumer goes on with the cursor it had on node 3 while node 2 takes more writes: it
// receives a change for every acknowledged write, and a cursor of one node's feed reads
// on another as the same position.
func TestE2E_ChangeFeed_ClusterResume(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 3)
	nss := []string{c.hubs[0].api().createNamespace(), c.hubs[1].api().createNamespace()}
	consumer := newFeedConsumer(t, c.hubs[0].admin, "0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { consumer.run(ctx) })
	defer wg.Wait()
	defer cancel()
	var acks []ackedWrite
	writeSome := func(w *feedWriter, n int) {
		for i := range n {
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			a, ok := w.write(wctx, w.nss[i%len(w.nss)], i)
			wcancel()
			if !ok {
				t.Fatalf("write %d to %s was not acknowledged within 30s", i, w.base)
			}
			acks = append(acks, a)
		}
	}
	w1, w2 := newFeedWriter(c.hubs[0].admin, 2000, nss), newFeedWriter(c.hubs[1].admin, 3000, nss)
	writeSome(w1, 40)
	writeSome(w2, 40)
	eventually(t, 30*time.Second, "node 1's feed has every write", func() error {
		if m := consumer.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes have no change yet", len(m), len(acks))
		}
		return nil
	})
	t.Logf("node 1's feed has the first %d writes", len(acks))
	c.hubs[0].kill()
	consumer.moveTo(c.hubs[2].admin)
	writeSome(w2, 60)
	t.Logf("node 2 took 60 more")
	eventually(t, 60*time.Second, "node 3's feed goes on with every write after the cursor", func() error {
		if m := consumer.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes have no change yet (first %+v)", len(m), len(acks), m[0])
		}
		return nil
	})
	cancel()
	wg.Wait()
	consumer.mu.Lock()
	bad, kinds := consumer.bad, consumer.kinds
	consumer.mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
	if kinds["created"] != 2 {
		t.Errorf("changes received: %v; want the 2 creations among them", kinds)
	}
	// Not a cursor: 400; a cursor past a log stream's newest change, never given: 410 with
	// the list to start over from.
	api2 := c.hubs[1].api()
	for _, bad := range []string{"nonsense", "c2.1", "c1.1..2"} {
		if status, b := api2.do("GET", "/v1/changes?after="+bad+"&wait=0s", nil); status != 400 || !strings.Contains(string(b), "BAD_REQUEST") {
			t.Fatalf("?after=%s: %d %s", bad, status, b)
		}
	}
	if status, b := api2.do("GET", "/v1/changes?after=c1.0.0.0.9&wait=0s", nil); status != 410 || !strings.Contains(string(b), "CURSOR_EXPIRED") {
		t.Fatalf("a cursor in a log stream the cluster does not have: %d %s", status, b)
	}
	// The two nodes' feeds have the same changes, and a cursor of one reads on the other as
	// the same position: after a namespace's creation there its updates, after its last
	// update nothing more of it. (A change's cursor may differ between the nodes, which
	// merge the log streams as the messages come.)
	on2, on3 := feedCursors(t, c.hubs[1]), feedCursors(t, c.hubs[2])
	if len(on2) != 4 || len(on3) != 4 {
		t.Fatalf("nodes 2 and 3 give different feeds:\n%v\n%v", on2, on3)
	}
	for _, p := range []struct {
		from map[string]string
		on   *proc
	}{{on2, c.hubs[2]}, {on3, c.hubs[1]}} {
		for _, ns := range nss {
			created, updated := p.from["created "+ns], p.from["updated "+ns]
			if created == "" || updated == "" {
				t.Fatalf("the feed lacks changes of %s: %v", ns, p.from)
			}
			afterCreated, afterUpdated := 0, 0
			for _, ch := range readFeed(t, p.on, created) {
				if ch.NamespaceID == ns && ch.Kind == "updated" {
					afterCreated++
				}
			}
			for _, ch := range readFeed(t, p.on, updated) {
				if ch.NamespaceID == ns {
					afterUpdated++
				}
			}
			if afterCreated == 0 || afterUpdated != 0 {
				t.Fatalf("on %s, after the other node's cursors of %s: %d updates after its creation (%s), %d changes after its last update (%s)",
					p.on.admin, ns, afterCreated, created, afterUpdated, updated)
			}
		}
	}
}

// readFeed reads a node's feed after cursor after up to its head.
func readFeed(t *testing.T, p *proc, after string) []changeJSON {
	t.Helper()
	var out []changeJSON
	for {
		var page changesPage
		p.api().json("GET", "/v1/changes?after="+after+"&wait=0s", nil, 200, &page)
		if len(page.Changes) == 0 {
			return out
		}
		out = append(out, page.Changes...)
		after = page.Cursor
	}
}

// TestE2E_ChangeFeed_Deleted: deleting a namespace (DELETE …?expectedEpoch=N) is one
// "deleted" change of the feed, the namespace's last, after its creation, on a single hub
// and on every node of a hub cluster; its versions go with it. A single hub's feed keeps
// the namespace's "updated" changes before it; a cluster's purges them with the
// namespace's log (the deletion stands for them).
func TestE2E_ChangeFeed_Deleted(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, keepsUpdates bool, writeTo, deleteOn *proc, readers ...*proc) {
		ns := writeTo.api().createNamespace()
		writeTo.api().set(ns, map[string]any{"k": "v"})
		writeTo.api().json("POST", "/v1/namespaces/"+ns+"/versions", []byte(`{}`), 201, nil)
		if status, b := deleteOn.api().do("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil); status != 204 {
			t.Fatalf("DELETE: %d %s", status, b)
		}
		for _, r := range readers {
			eventually(t, 20*time.Second, r.name+"'s feed has the deletion", func() error {
				var kinds []string
				for _, c := range readFeed(t, r, "0") {
					if c.NamespaceID == ns {
						kinds = append(kinds, c.Kind)
					}
				}
				if len(kinds) < 2 || kinds[0] != "created" || kinds[len(kinds)-1] != "deleted" || slicesCount(kinds, "deleted") != 1 ||
					(keepsUpdates && slicesCount(kinds, "updated") == 0) {
					return fmt.Errorf("changes of %s: %v; want created, updated… (kept: %v), deleted", ns, kinds, keepsUpdates)
				}
				return nil
			})
		}
		if status, b := deleteOn.api().do("GET", "/v1/namespaces/"+ns+"/versions", nil); status != 404 {
			t.Fatalf("the versions of a deleted namespace: %d %s", status, b)
		}
		vs, body := deleteOn.api().do("GET", "/v1/namespaces/"+ns+"/versions/1/doc", nil)
		if vs != 404 {
			t.Fatalf("a version of a deleted namespace: %d %s", vs, body)
		}
	}
	t.Run("SingleHub", func(t *testing.T) {
		c := newCluster(t)
		hub := c.startHub()
		check(t, true, hub, hub, hub)
	})
	t.Run("Cluster", func(t *testing.T) {
		c := newHubCluster(t, 3)
		check(t, false, c.hubs[0], c.hubs[1], c.hubs...)
	})
}

func slicesCount(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
