package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/faultproxy"
)

// The long fault-injection run, `make chaos` (skipped unless NOMICORE_CHAOS=1):
//
//   - kill -9: a hub and NOMICORE_CHAOS_PEERS peers (3) under write load, a writer on each
//     process; NOMICORE_CHAOS_CYCLES cycles (1,000), each killing the hub or one peer
//     (alternately) with SIGKILL and restarting it; every 100 cycles the writers stop, every
//     write acknowledged so far must be on every node, and the run moves to a new namespace
//     (the documents stay small; the peers carry them all on one connection).
//   - flapping: the peers reach the hub through fault proxies whose links go down (with a
//     cut), stall or go half-open at random for NOMICORE_CHAOS_FLAP (10m), under write load,
//     with the production backoff settings; it reports how much of the time the links were
//     up each peer was connected.
//
// It ends with a summary (cycles, acknowledged writes, lost — which must be 0), written to
// stdout and to NOMICORE_CHAOS_SUMMARY when set.
func TestChaos(t *testing.T) {
	if os.Getenv("NOMICORE_CHAOS") != "1" {
		t.Skip("the long fault-injection run: make chaos (NOMICORE_CHAOS=1)")
	}
	cycles := envInt(t, "NOMICORE_CHAOS_CYCLES", 1000)
	peers := envInt(t, "NOMICORE_CHAOS_PEERS", 3)
	flap := 10 * time.Minute
	if v := os.Getenv("NOMICORE_CHAOS_FLAP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NOMICORE_CHAOS_FLAP: %v", err)
		}
		flap = d
	}
	var summary []string
	t.Cleanup(func() {
		text := "=== chaos summary ===\n" + strings.Join(summary, "\n") + "\n"
		if t.Failed() {
			text += "RESULT: FAILED\n"
		} else {
			text += "RESULT: ok\n"
		}
		fmt.Print(text)
		if path := os.Getenv("NOMICORE_CHAOS_SUMMARY"); path != "" {
			os.WriteFile(path, []byte(text), 0o644)
		}
	})
	if cycles > 0 {
		t.Run("kill -9 cycles", func(t *testing.T) { summary = append(summary, chaosKills(t, cycles, peers)...) })
	}
	if flap > 0 {
		t.Run("flapping links", func(t *testing.T) { summary = append(summary, chaosFlapping(t, flap, peers)...) })
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// chaosArgs: info logs (the run is long), fast liveness and backoff.
var chaosArgs = append(append([]string{}, liveness...), "--log-level", "info")

// chaosNamespace is one namespace of a run with the writes made to it.
type chaosNamespace struct {
	ns     string
	writes ledger
}

func chaosKills(t *testing.T, cycles, npeers int) []string {
	c := newCluster(t)
	hub := c.startHub(chaosArgs...)
	var ps []*proc
	tokens := map[string]string{}
	for i := 1; i <= npeers; i++ {
		name := fmt.Sprintf("peer-%d", i)
		tokens[name] = c.tokenFile(name, c.token(name))
		ps = append(ps, c.startPeer(name, tokens[name], chaosArgs...))
	}
	all := append([]*proc{hub}, ps...)
	var done []*chaosNamespace
	var cur *chaosNamespace
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	start := time.Now()
	hubKills, peerKills, quick := 0, 0, 0

	begin := func() {
		cur = &chaosNamespace{ns: hub.api().createNamespace()}
		for _, p := range ps {
			p.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+cur.ns+`","owner":"default"}`), 201, nil)
		}
		for _, p := range ps {
			targetState(t, p, cur.ns, "live")
		}
		for _, p := range all {
			cur.writes.add(newWriter(p.name, p)).run(cur.ns, 20*time.Millisecond)
		}
	}
	checkpoint := func() {
		cur.writes.haltAll()
		waitAllReady(t, ps)
		n := noAckedWriteLost(t, cur.ns, &cur.writes, 2*time.Minute, all...)
		t.Logf("%s: %d acknowledged keys on every node after %d cycles (%v); %s", cur.ns, n, hubKills+peerKills,
			time.Since(start).Round(time.Second), cur.writes.summary())
		done = append(done, cur)
		cur = nil
	}

	begin()
	for i := 0; i < cycles; i++ {
		victim := hub
		if i%2 == 1 {
			victim = ps[(i/2)%len(ps)]
			peerKills++
		} else {
			hubKills++
		}
		victim.kill()
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		if victim == hub {
			c.startHub(chaosArgs...)
		} else {
			c.startPeer(victim.name, tokens[victim.name], chaosArgs...)
		}
		// Most cycles let the system settle before the next kill; one in five kills again
		// at once, in the middle of the reconnection and catch-up.
		if rng.IntN(5) == 0 {
			quick++
		} else {
			waitAllReady(t, ps)
			time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		}
		if (i+1)%100 == 0 || i == cycles-1 {
			checkpoint()
			if i < cycles-1 {
				begin()
			}
		}
		if t.Failed() {
			break
		}
	}
	if cur != nil {
		checkpoint()
	}
	// The end: every namespace of the run still holds all its acknowledged writes everywhere.
	var posts, oks, keys, lost int
	for _, cn := range done {
		acked := cn.writes.acked()
		p, o, k := cn.writes.totals()
		posts, oks, keys = posts+p, oks+o, keys+k
		var n int
		var err error
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if n, err = checkAcked(t, cn.ns, acked, all...); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("%s at the end: %v", cn.ns, err)
		}
		lost += n
	}
	return []string{
		fmt.Sprintf("kill -9: %d cycles (hub %d, peers %d; %d of them killed again before settling) with %d peers, %d namespaces, in %v",
			hubKills+peerKills, hubKills, peerKills, quick, len(ps), len(done), time.Since(start).Round(time.Second)),
		fmt.Sprintf("kill -9: writes posted %d, acknowledged (204) %d carrying %d keys; lost %d (acknowledged keys missing on some node at the end)", posts, oks, keys, lost),
	}
}

// waitAllReady waits until every peer's connection is ready.
func waitAllReady(t *testing.T, ps []*proc) {
	t.Helper()
	eventually(t, 60*time.Second, "every peer connected", func() error {
		for _, p := range ps {
			if status, b := p.api().do("GET", "/readyz", nil); status != http.StatusOK {
				return fmt.Errorf("%s: %d %s", p.name, status, b)
			}
		}
		return nil
	})
}

// flapStats counts one link's faults and the time it was up.
type flapStats struct {
	outages, stalls, halfOpens int
	up                         []interval // when the link carried new connections
}

type interval struct{ from, to time.Time }

func chaosFlapping(t *testing.T, d time.Duration, npeers int) []string {
	c := newCluster(t)
	// The production backoff (what a live fraction means for users); liveness stays fast so
	// a stall or a half-open link is found within seconds.
	args := append(append([]string{}, chaosArgs...), "--base-backoff", "250ms", "--max-backoff", "30s", "--backoff-reset-after", "60s")
	hub := c.startHub(args...)
	ns := hub.api().createNamespace()
	var ps []*proc
	var proxies []*faultproxy.Proxy
	for i := 1; i <= npeers; i++ {
		name := fmt.Sprintf("peer-%d", i)
		px, err := faultproxy.New(c.hubRepl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		proxies = append(proxies, px)
		ps = append(ps, c.startPeer(name, c.tokenFile(name, c.token(name)),
			append([]string{"--hub-url", "ws://" + px.Addr() + "/v1/replication", "--target", ns}, args...)...))
	}
	for _, p := range ps {
		targetState(t, p, ns, "live")
	}
	all := append([]*proc{hub}, ps...)
	var writes ledger
	t.Cleanup(writes.haltAll)
	for _, p := range all {
		writes.add(newWriter(p.name, p)).run(ns, 50*time.Millisecond)
	}
	start := time.Now()
	end := start.Add(d)
	stats := make([]*flapStats, len(proxies))
	var wg sync.WaitGroup
	for i, px := range proxies {
		stats[i] = &flapStats{}
		wg.Add(1)
		go func(px *faultproxy.Proxy, st *flapStats, seed uint64) {
			defer wg.Done()
			flapLink(px, st, end, rand.New(rand.NewPCG(seed, 2)))
		}(px, stats[i], uint64(time.Now().UnixNano())+uint64(i))
	}
	wg.Wait()
	for _, px := range proxies {
		px.Heal()
	}
	writes.haltAll()
	waitAllReady(t, ps)
	acked := writes.acked()
	var lost int
	var err error
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if lost, err = checkAcked(t, ns, acked, all...); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("after flapping: %v", err)
	}
	for _, p := range all {
		if p != hub {
			checkPeerConnection(t, p)
			checkChannel(t, p, ns)
		}
	}
	checkHubConnections(t, hub)

	posts, oks, _ := writes.totals()
	out := []string{fmt.Sprintf("flapping: %v with %d peers behind fault proxies; %s", d.Round(time.Second), len(ps), writes.summary())}
	var outages, stalls, halfOpens int
	var fractions []string
	for i, p := range ps {
		st := stats[i]
		outages, stalls, halfOpens = outages+st.outages, stalls+st.stalls, halfOpens+st.halfOpens
		fractions = append(fractions, fmt.Sprintf("%s %.2f", p.name, liveFraction(t, p, st.up)))
	}
	out = append(out,
		fmt.Sprintf("flapping: link faults: %d outages (cut, then down), %d stalls, %d half-open", outages, stalls, halfOpens),
		fmt.Sprintf("flapping: writes posted %d, acknowledged (204) %d carrying %d keys; lost %d", posts, oks, len(acked), lost),
		fmt.Sprintf("flapping: fraction of link-up time each peer was connected: %s", strings.Join(fractions, ", ")))
	return out
}

// flapLink runs one link until end: up for 0.5–4 s, then a fault — an outage (cut, down for
// 0.1–2 s) seven times in ten, a stall of 0.5–3 s or a half-open link otherwise.
func flapLink(px *faultproxy.Proxy, st *flapStats, end time.Time, rng *rand.Rand) {
	for {
		upFrom := time.Now()
		time.Sleep(time.Duration(500+rng.IntN(3500)) * time.Millisecond)
		now := time.Now()
		if now.After(end) {
			st.up = append(st.up, interval{upFrom, end})
			return
		}
		st.up = append(st.up, interval{upFrom, now})
		switch r := rng.IntN(10); {
		case r < 7:
			st.outages++
			px.SetDown(true)
			px.Cut()
			time.Sleep(time.Duration(100+rng.IntN(1900)) * time.Millisecond)
			px.SetDown(false)
		case r < 9:
			st.stalls++
			px.Stall()
			time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
			px.Resume()
		default:
			st.halfOpens++
			px.HalfOpen() // the link carries new connections at once: counted as up
		}
	}
}

// liveFraction is the part of the link-up intervals the peer's connection was ready.
func liveFraction(t *testing.T, p *proc, up []interval) float64 {
	t.Helper()
	var ready []interval
	var since time.Time
	for _, tr := range transitions(t, p, "connection-state-changed", "") {
		switch {
		case tr.to == "ready":
			since = tr.at
		case tr.from == "ready" && !since.IsZero():
			ready = append(ready, interval{since, tr.at})
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		ready = append(ready, interval{since, time.Now()})
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].from.Before(ready[j].from) })
	var total, live time.Duration
	for _, u := range up {
		total += u.to.Sub(u.from)
		for _, r := range ready {
			from, to := later(u.from, r.from), earlier(u.to, r.to)
			if to.After(from) {
				live += to.Sub(from)
			}
		}
	}
	if total == 0 {
		return 0
	}
	return float64(live) / float64(total)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
