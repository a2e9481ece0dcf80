package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/faultproxy"
	"github.com/nomicore/nomicore/yjs"
)

// The fault-injection suite's tools: writers that account for every acknowledged write, the
// check that none was lost, and the state sequences read back from the processes' logs.

// liveness are protocol settings that detect a silent link within about 2.5 s (a ping every
// 1.5 s, a second for its pong: room for a slow machine running the race detector) and fail
// a stuck handshake within 2 s.
var liveness = []string{"--ping-interval", "1500ms", "--pong-timeout", "1s", "--hello-timeout", "2s"}

// writer writes to one process's admin API the way an editor does: one Yjs client of its
// own, one new key of the root map "notes" per write, each write carrying everything the
// process has not acknowledged yet (so a write that failed is sent again with the next one,
// and no write depends on one the process lacks). An acknowledged write is one whose POST
// …/update answered 204; every key it carried must be found on every node in the end.
type writer struct {
	name   string
	target *proc
	client *http.Client

	doc     *yjs.Doc
	ackedSV []byte // the state vector of this client's writes the target acknowledged

	mu      sync.Mutex        // guards the fields below
	seq     int               // keys written so far
	pending []string          // keys written, not acknowledged yet
	acked   map[string]string // key → value of every acknowledged write
	calls   int               // POSTs sent
	oks     int               // POSTs answered 204: acknowledged writes
	failed  map[string]int    // failed POSTs by outcome (status code or "transport")

	stop chan struct{}
	done chan struct{}
}

func newWriter(name string, target *proc) *writer {
	return &writer{name: name, target: target, doc: yjs.NewDoc(), acked: map[string]string{}, failed: map[string]int{},
		client: &http.Client{Transport: target.httpClient().Transport}}
}

// run writes every interval until stopped.
func (w *writer) run(ns string, interval time.Duration) {
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.write(ns)
			}
		}
	}()
}

// halt stops a running writer and waits for its last write.
func (w *writer) halt() {
	if w.stop == nil {
		return
	}
	close(w.stop)
	<-w.done
	w.stop = nil
}

// write makes one new key and sends everything not acknowledged yet.
func (w *writer) write(ns string) {
	w.mu.Lock()
	w.seq++
	key, val := fmt.Sprintf("%s-%06d", w.name, w.seq), fmt.Sprint(w.seq)
	w.pending = append(w.pending, key)
	w.mu.Unlock()
	m := w.doc.GetMap("notes")
	w.doc.Transact(nil, func(*yjs.Transaction) { m.Set(key, val) })
	update, err := yjs.EncodeStateAsUpdate(w.doc, w.ackedSV)
	if err != nil {
		panic(err) // our own document: cannot happen
	}
	sv := w.doc.EncodeStateVector()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", w.target.admin+"/v1/namespaces/"+ns+"/update", bytes.NewReader(update))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := w.client.Do(req)
	outcome := "transport"
	if err == nil {
		resp.Body.Close()
		outcome = fmt.Sprint(resp.StatusCode)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if outcome != "204" {
		w.failed[outcome]++
		return
	}
	w.oks++
	for _, k := range w.pending {
		w.acked[k] = strings.TrimLeft(k[strings.LastIndexByte(k, '-')+1:], "0")
	}
	w.pending, w.ackedSV = nil, sv
}

// ledger is the writes of a run.
type ledger struct{ writers []*writer }

func (l *ledger) add(w *writer) *writer { l.writers = append(l.writers, w); return w }

func (l *ledger) haltAll() {
	for _, w := range l.writers {
		w.halt()
	}
}

// acked returns every acknowledged write, key → value.
func (l *ledger) acked() map[string]string {
	out := map[string]string{}
	for _, w := range l.writers {
		w.mu.Lock()
		for k, v := range w.acked {
			out[k] = v
		}
		w.mu.Unlock()
	}
	return out
}

// totals counts the posts, the acknowledged ones (204) and the keys they carried.
func (l *ledger) totals() (posts, oks, keys int) {
	for _, w := range l.writers {
		w.mu.Lock()
		posts, oks, keys = posts+w.calls, oks+w.oks, keys+len(w.acked)
		w.mu.Unlock()
	}
	return posts, oks, keys
}

// summary is one line: acknowledged and failed writes per writer.
func (l *ledger) summary() string {
	var parts []string
	for _, w := range l.writers {
		w.mu.Lock()
		parts = append(parts, fmt.Sprintf("%s: %d posts, %d acknowledged carrying %d keys, failed %v", w.name, w.calls, w.oks, len(w.acked), w.failed))
		w.mu.Unlock()
	}
	return strings.Join(parts, "; ")
}

// noAckedWriteLost waits until every process holds every acknowledged write (with its value)
// and all hold the same "notes"; it fails naming what is missing where. It returns the
// number of acknowledged writes.
func noAckedWriteLost(t *testing.T, ns string, l *ledger, timeout time.Duration, procs ...*proc) int {
	t.Helper()
	acked := l.acked()
	eventually(t, timeout, "every acknowledged write on every node", func() error {
		_, err := checkAcked(t, ns, acked, procs...)
		return err
	})
	return len(acked)
}

// checkAcked reads the "notes" of ns on every process: lost is how many acknowledged writes
// are missing (or changed) on at least one of them; err says what is missing where, or
// that the processes differ.
func checkAcked(t *testing.T, ns string, acked map[string]string, procs ...*proc) (lost int, err error) {
	t.Helper()
	var first []byte
	lostKeys := map[string]bool{}
	var problems []string
	for _, p := range procs {
		notes, status := p.api().notes(ns)
		if status != 200 {
			return len(acked), fmt.Errorf("%s: doc status %d", p.name, status)
		}
		var missing []string
		for k, v := range acked {
			if got, ok := notes[k]; !ok || fmt.Sprint(got) != v {
				missing = append(missing, k)
				lostKeys[k] = true
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			problems = append(problems, fmt.Sprintf("%s lacks %d of %d acknowledged writes (first %v)", p.name, len(missing), len(acked), missing[:min(5, len(missing))]))
			continue
		}
		b, _ := json.Marshal(notes)
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			problems = append(problems, fmt.Sprintf("%s holds %d keys, unlike %s: not converged", p.name, len(notes), procs[0].name))
		}
	}
	if len(problems) > 0 {
		return len(lostKeys), errors.New(strings.Join(problems, "; "))
	}
	return 0, nil
}

// --- state sequences, from the JSON logs ---

// transition is one state change of a connection or a namespace channel.
type transition struct {
	at       time.Time
	conn     string // connection id ("" for a peer connection not yet handshaken)
	from, to string
}

func (tr transition) String() string { return tr.from + ">" + tr.to }

// transitions returns the state changes of msg type typ ("connection-state-changed" or
// "channel-state-changed", the latter of namespace ns only) in a process's log.
func transitions(t *testing.T, p *proc, typ, ns string) []transition {
	t.Helper()
	var out []transition
	for _, ev := range logEvents(t, p.log, typ) {
		if ns != "" && ev["namespaceId"] != ns {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["time"]))
		conn, _ := ev["connectionId"].(string)
		out = append(out, transition{at: at, conn: conn, from: fmt.Sprint(ev["from"]), to: fmt.Sprint(ev["to"])})
	}
	return out
}

// since keeps the transitions at or after t0.
func since(trs []transition, t0 time.Time) []transition {
	i := sort.Search(len(trs), func(i int) bool { return !trs[i].at.Before(t0) })
	return trs[i:]
}

func seq(trs []transition) string {
	parts := make([]string, len(trs))
	for i, tr := range trs {
		parts[i] = tr.String()
	}
	return strings.Join(parts, " ")
}

// peerConnEdges are the peer connection state machine's edges
// (docs/protocol.md#peer-connection-states).
var peerConnEdges = map[string][]string{
	"stopped":      {"disconnected"},
	"disconnected": {"connecting", "stopped"},
	"connecting":   {"handshaking", "backoff", "blocked", "stopped"},
	"handshaking":  {"ready", "backoff", "blocked", "stopped"},
	"ready":        {"draining", "backoff", "blocked"},
	"draining":     {"stopped", "backoff"},
	"backoff":      {"connecting", "stopped", "disconnected"},
	"blocked":      {"disconnected", "stopped"},
}

// hubConnEdges are the hub connection's (docs/protocol.md#hub-connection-states), per
// connection.
var hubConnEdges = map[string][]string{
	"handshaking": {"ready", "draining", "closed"},
	"ready":       {"draining", "closed"},
	"draining":    {"closed"},
}

// checkPeerConnection checks a peer's whole connection history: every change an edge of
// docs/protocol.md#peer-connection-states, continuous (each from is the previous to, across
// restarts of the process, which start at stopped), never blocked.
func checkPeerConnection(t *testing.T, p *proc) []transition {
	t.Helper()
	trs := transitions(t, p, "connection-state-changed", "")
	prev := ""
	for i, tr := range trs {
		if !slices.Contains(peerConnEdges[tr.from], tr.to) {
			t.Errorf("%s: connection change %d, %s, is not an edge of the peer's state machine\nhistory: %s", p.name, i, tr, seq(trs))
		}
		if prev != "" && tr.from != prev && tr.from != "stopped" {
			t.Errorf("%s: connection change %d, %s, does not follow %s\nhistory: %s", p.name, i, tr, prev, seq(trs))
		}
		if tr.to == "blocked" {
			t.Errorf("%s: the connection went blocked: a fault must only ever be temporary\nhistory: %s", p.name, seq(trs))
		}
		prev = tr.to
	}
	return trs
}

// checkHubConnections checks the hub's connections' histories: each connection's changes
// edges of docs/protocol.md#hub-connection-states, in order.
func checkHubConnections(t *testing.T, hub *proc) map[string][]transition {
	t.Helper()
	byConn := map[string][]transition{}
	for i, tr := range transitions(t, hub, "connection-state-changed", "") {
		id := tr.conn
		if id == "" { // a connection that closed before its handshake named it
			id = fmt.Sprintf("(unnamed %d)", i)
		}
		byConn[id] = append(byConn[id], tr)
	}
	for id, trs := range byConn {
		for i, tr := range trs {
			if !slices.Contains(hubConnEdges[tr.from], tr.to) || (i > 0 && trs[i-1].to != tr.from) {
				t.Errorf("hub connection %s: %s is not an edge after %s\nhistory: %s", id, tr, trs[max(i-1, 0)], seq(trs))
			}
		}
	}
	return byConn
}

// checkChannel checks a peer's namespace channel history: never conflicted or failed, and
// live at the end.
func checkChannel(t *testing.T, p *proc, ns string) []transition {
	t.Helper()
	trs := transitions(t, p, "channel-state-changed", ns)
	for _, tr := range trs {
		if tr.to == "failed" || tr.to == "conflicted" {
			t.Errorf("%s: namespace went %s\nhistory: %s", p.name, tr.to, seq(trs))
		}
	}
	if len(trs) == 0 || trs[len(trs)-1].to != "live" {
		t.Errorf("%s: namespace not live at the end\nhistory: %s", p.name, seq(trs))
	}
	return trs
}

// backoffReasons returns the reasons of a peer's backoffs since t0, in order.
func backoffReasons(t *testing.T, p *proc, t0 time.Time) []string {
	t.Helper()
	var out []string
	for _, ev := range logEvents(t, p.log, "connection-backoff-scheduled") {
		if at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["time"])); !at.Before(t0) {
			out = append(out, fmt.Sprint(ev["reason"]))
		}
	}
	return out
}

// faultEnv is a hub, peer-a connected through a fault proxy and peer-b connected directly,
// replicating one namespace, with a writer on each.
type faultEnv struct {
	t        *testing.T
	c        *cluster
	hub      *proc
	a, b     *proc
	proxy    *faultproxy.Proxy
	ns       string
	writes   ledger
	tokA     string
	tokB     string
	interval time.Duration
}

func newFaultEnv(t *testing.T, extra ...string) *faultEnv {
	t.Helper()
	c := newCluster(t)
	f := &faultEnv{t: t, c: c, interval: 20 * time.Millisecond}
	f.tokA, f.tokB = c.tokenFile("peer-a", c.token("peer-a")), c.tokenFile("peer-b", c.token("peer-b"))
	args := append(append([]string{}, liveness...), extra...)
	f.hub = c.startHub(args...)
	f.ns = f.hub.api().createNamespace()
	p, err := faultproxy.New(c.hubRepl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f.proxy = p
	f.a = c.startPeer("peer-a", f.tokA, append([]string{"--hub-url", "ws://" + p.Addr() + "/v1/replication", "--target", f.ns}, args...)...)
	f.b = c.startPeer("peer-b", f.tokB, append([]string{"--target", f.ns}, args...)...)
	targetState(t, f.a, f.ns, "live")
	targetState(t, f.b, f.ns, "live")
	t.Cleanup(f.writes.haltAll)
	return f
}

// startWriters starts one writer on each process.
func (f *faultEnv) startWriters() {
	for _, p := range []*proc{f.hub, f.a, f.b} {
		f.writes.add(newWriter(p.name, p)).run(f.ns, f.interval)
	}
}

// finish stops the writers and checks that every acknowledged write reached every node and
// that every state history is legal; it returns how many writes were acknowledged.
func (f *faultEnv) finish() int {
	f.t.Helper()
	f.writes.haltAll()
	n := noAckedWriteLost(f.t, f.ns, &f.writes, 60*time.Second, f.hub, f.a, f.b)
	f.t.Logf("%d acknowledged writes, none lost; %s; proxy %+v", n, f.writes.summary(), f.proxy.Stats())
	if n == 0 {
		f.t.Fatal("no write was acknowledged: the run proves nothing")
	}
	checkPeerConnection(f.t, f.a)
	checkPeerConnection(f.t, f.b)
	checkHubConnections(f.t, f.hub)
	checkChannel(f.t, f.a, f.ns)
	checkChannel(f.t, f.b, f.ns)
	return n
}
