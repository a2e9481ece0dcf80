package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// The fault workloads: how fast peers come back after a hub outage (storm), how much of the
// time a crash-looping hub is up its peers are live (crashloop), and the same for links cut
// every few seconds (linkcut). They use the production backoff settings (baseBackoffMs 250,
// maxBackoffMs 30 000, backoffResetAfterMs 60 000), and each runs twice: with the peers'
// default reconnect policy and the hub's admission control ("adaptive"), and with the
// protocol's backoff exactly (docs/protocol.md#backoff) and no admission control
// ("contract", the baseline).

// policy is how the peers back off and whether the hub admits upgrades under control.
type policy string

const (
	adaptive policy = "adaptive"
	contract policy = "contract"
)

// faultConfig is the protocol configuration of the fault workloads: the defaults (real
// backoff), in the v1 generation the namespace layer runs.
func faultConfig() protocol.Config {
	c := protocol.DefaultConfig()
	c.Generation = protocol.GenerationV1
	return c
}

// liveTracker follows one peer through its channel-state-changed events: the peer is live
// while all n of its targets are. It keeps the spans of time it was live.
type liveTracker struct {
	n int

	mu      sync.Mutex // guards the fields below: events arrive on the connection's goroutines
	live    int
	since   time.Time // start of the current live span; zero when not live
	spans   [][2]time.Time
	readyAt time.Time // when the connection last became ready
}

func (l *liveTracker) Observe(e observer.Event) {
	if cs, ok := e.Payload.(observer.ConnectionStateChanged); ok && cs.To == observer.ConnReady {
		l.mu.Lock()
		l.readyAt = time.Now()
		l.mu.Unlock()
		return
	}
	c, ok := e.Payload.(observer.ChannelStateChanged)
	if !ok || c.From == c.To {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.To == observer.ChannelLive:
		l.live++
		if l.live == l.n {
			l.since = now
		}
	case c.From == observer.ChannelLive:
		if l.live == l.n {
			l.spans = append(l.spans, [2]time.Time{l.since, now})
			l.since = time.Time{}
		}
		l.live--
	}
}

// liveSince returns when the current live span began, or zero.
func (l *liveTracker) liveSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.since
}

// ready returns when the connection last became ready.
func (l *liveTracker) ready() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readyAt
}

// firstLiveIn returns how long after w began the peer became live within w (false if it
// did not).
func (l *liveTracker) firstLiveIn(w [2]time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	starts := make([]time.Time, 0, len(l.spans)+1)
	for _, s := range l.spans {
		starts = append(starts, s[0])
	}
	if !l.since.IsZero() {
		starts = append(starts, l.since)
	}
	for _, st := range starts {
		if !st.Before(w[0]) && st.Before(w[1]) {
			return st.Sub(w[0]), true
		}
	}
	return 0, false
}

// liveWithin returns how long the peer was live within the windows.
func (l *liveTracker) liveWithin(windows [][2]time.Time, now time.Time) time.Duration {
	l.mu.Lock()
	spans := slices.Clone(l.spans)
	if !l.since.IsZero() {
		spans = append(spans, [2]time.Time{l.since, now})
	}
	l.mu.Unlock()
	var d time.Duration
	for _, s := range spans {
		for _, w := range windows {
			from, to := later(s[0], w[0]), earlier(s[1], w[1])
			if to.After(from) {
				d += to.Sub(from)
			}
		}
	}
	return d
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

// faultCluster is a hub child process that can crash and restart on the same address and
// data, and peers in this process, each with a liveTracker.
type faultCluster struct {
	dir      string
	spec     hubSpec
	hub      *hubProc
	nss      []string
	peers    []*peer
	trackers []*liveTracker
}

// startFaultCluster starts a hub with peers × namespaces and the peers, with pol, and waits
// until every peer is live. dialer, when not nil, is the peers' dialer.
func startFaultCluster(name string, pol policy, peers, namespaces int, dialer ws.Dialer) (*faultCluster, error) {
	dir, err := os.MkdirTemp("", "benchrepl-"+name+"-")
	if err != nil {
		return nil, err
	}
	c := &faultCluster{dir: dir, spec: hubSpec{Dir: filepath.Join(dir, "hub"), Peers: peers, Namespaces: namespaces,
		NoAdmission: pol == contract}}
	if c.hub, err = startHub(c.spec); err != nil {
		c.stop()
		return nil, err
	}
	c.nss = c.hub.hello.Namespaces
	c.spec.Namespaces, c.spec.Listen = 0, addrOf(c.hub.hello.URL)
	for i := range peers {
		tr := &liveTracker{n: namespaces}
		p, err := startPeerWith(filepath.Join(dir, peerName(i)), i, c.nss, ws.PeerOptions{Config: faultConfig(),
			URL: c.hub.hello.URL, Dialer: dialer, ContractBackoff: pol == contract, Observer: tr})
		if err != nil {
			c.stop()
			return nil, err
		}
		c.peers, c.trackers = append(c.peers, p), append(c.trackers, tr)
	}
	if err := c.waitAllLive(time.Time{}, 5*time.Minute); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// addrOf is the host:port of a ws:// URL.
func addrOf(url string) string {
	rest, _ := strings.CutPrefix(url, "ws://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// waitAllLive waits until every peer has been live since after t.
func (c *faultCluster) waitAllLive(t time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		waiting := 0
		for _, tr := range c.trackers {
			if s := tr.liveSince(); s.IsZero() || !s.After(t) {
				waiting++
			}
		}
		if waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d peers not live after %v", waiting, len(c.trackers), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// crash kills the hub (SIGKILL) and returns when it is gone.
func (c *faultCluster) crash() time.Time {
	_ = c.hub.kill()
	return time.Now()
}

// restart starts the hub again on the same address and data; it returns once the hub
// listens. A port lost meanwhile to another process is retried for a while.
func (c *faultCluster) restart() (time.Time, error) {
	var err error
	for range 50 {
		if c.hub, err = startHub(c.spec); err == nil {
			return time.Now(), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, err
}

// refused is how many upgrades the current hub process refused with 503, and how many of
// them for the namespace opens in progress.
func (c *faultCluster) refused() (all, atOpening int64) {
	u, err := c.hub.usage()
	if err != nil {
		return 0, 0
	}
	return u.Refused, u.RefusedAtOpening
}

func (c *faultCluster) stop() {
	_ = stopAll(c.peers)
	if c.hub != nil {
		_ = c.hub.stop()
	}
	_ = os.RemoveAll(c.dir)
}

// ---- storm ----------------------------------------------------------------------------------

// stormResult: every peer live (all its targets), the hub killed for Outage, restarted;
// how long after the hub listened again each peer had all its targets live again.
type stormResult struct {
	Policy            policy
	Peers, Namespaces int
	Outage            time.Duration
	P50, P99, Max     time.Duration
	// ConnP50, ConnP99: after the hub came back, each peer's connection ready (its
	// targets then open and reconcile).
	ConnP50, ConnP99 time.Duration
	Refused          int64 // upgrades the restarted hub refused with 503 (admission control)
	RefusedAtOpening int64 // of those, at the limit of namespace opens in progress
}

func (r stormResult) String() string {
	return fmt.Sprintf("storm: %d peers × %d namespaces, %v outage, %s: after the hub came back, all live in %v (p50 %v, p99 %v; connected p50 %v, p99 %v); %d upgrades refused with 503, %d of them for the opens in progress",
		r.Peers, r.Namespaces, r.Outage, r.Policy, r.Max.Round(10*time.Millisecond), r.P50.Round(10*time.Millisecond),
		r.P99.Round(10*time.Millisecond), r.ConnP50.Round(10*time.Millisecond), r.ConnP99.Round(10*time.Millisecond), r.Refused, r.RefusedAtOpening)
}

// runStorm measures one outage with one policy, on a fresh cluster (so the baseline's
// attempt counters start from zero, as after a long stable period).
func runStorm(pol policy, peers, namespaces int, outage time.Duration) (stormResult, error) {
	res := stormResult{Policy: pol, Peers: peers, Namespaces: namespaces, Outage: outage}
	c, err := startFaultCluster("storm", pol, peers, namespaces, nil)
	if err != nil {
		return res, err
	}
	defer c.stop()
	killed := c.crash()
	time.Sleep(outage - time.Since(killed))
	up, err := c.restart()
	if err != nil {
		return res, err
	}
	if err := c.waitAllLive(up, 5*time.Minute); err != nil {
		return res, err
	}
	var rec, conn []time.Duration
	for _, tr := range c.trackers {
		rec = append(rec, tr.liveSince().Sub(up))
		conn = append(conn, tr.ready().Sub(up))
	}
	res.P50, res.P99, res.Max = percentiles(rec)
	res.ConnP50, res.ConnP99, _ = percentiles(conn)
	res.Refused, res.RefusedAtOpening = c.refused()
	return res, nil
}

// percentiles returns the median, the 99th percentile and the maximum of ds (sorted here).
func percentiles(ds []time.Duration) (p50, p99, top time.Duration) {
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], ds[len(ds)-1]
}

// ---- crash loop -----------------------------------------------------------------------------

// liveFraction: the part of the measured time each peer was live (all its targets).
type liveFraction struct {
	Policy            policy
	Peers, Namespaces int
	Measured          time.Duration // the windows the fraction is of
	Mean, Min, P10    float64
}

func fractions(trs []*liveTracker, windows [][2]time.Time, now time.Time) (mean, lowest, p10 float64, total time.Duration) {
	for _, w := range windows {
		total += w[1].Sub(w[0])
	}
	var fs []float64
	for _, tr := range trs {
		f := float64(tr.liveWithin(windows, now)) / float64(total)
		fs = append(fs, f)
		mean += f
	}
	slices.Sort(fs)
	return mean / float64(len(fs)), fs[0], fs[len(fs)/10], total
}

type crashLoopResult struct {
	liveFraction
	// RecoverP50, RecoverP99: after each restart, how long until each peer was live; Missed:
	// (peer, restart) pairs where it never got live before the next crash.
	RecoverP50, RecoverP99 time.Duration
	Missed                 int
	Cycles                 int
	UpMin, UpMax           time.Duration
	Down                   time.Duration
}

func (r crashLoopResult) String() string {
	return fmt.Sprintf("crashloop: %d peers × %d namespaces, hub killed %d times (up %v–%v, down %v), %s: peers live %.1f%% of the hub's up time (mean; lowest peer %.1f%%, p10 %.1f%%); live again after each restart in p50 %v, p99 %v (never, %d times)",
		r.Peers, r.Namespaces, r.Cycles, r.UpMin, r.UpMax, r.Down, r.Policy, 100*r.Mean, 100*r.Min, 100*r.P10,
		r.RecoverP50.Round(10*time.Millisecond), r.RecoverP99.Round(10*time.Millisecond), r.Missed)
}

// runCrashLoop kills the hub, then cycles times, after down, restarts it, keeps it up for a
// time drawn uniformly from [upMin, upMax] and kills it again. The windows measured are the
// up times after each restart (from when the hub listens to its kill).
func runCrashLoop(pol policy, peers, namespaces, cycles int, upMin, upMax, down time.Duration) (crashLoopResult, error) {
	res := crashLoopResult{liveFraction: liveFraction{Policy: pol, Peers: peers, Namespaces: namespaces}, Cycles: cycles,
		UpMin: upMin, UpMax: upMax, Down: down}
	c, err := startFaultCluster("crashloop", pol, peers, namespaces, nil)
	if err != nil {
		return res, err
	}
	defer c.stop()
	r := rand.New(rand.NewPCG(17, 29))
	var windows [][2]time.Time
	c.crash()
	for range cycles {
		time.Sleep(down)
		up, err := c.restart()
		if err != nil {
			return res, err
		}
		time.Sleep(upMin + time.Duration(r.Int64N(int64(upMax-upMin)+1)))
		windows = append(windows, [2]time.Time{up, c.crash()})
	}
	res.Mean, res.Min, res.P10, res.Measured = fractions(c.trackers, windows, time.Now())
	var rec []time.Duration
	for _, tr := range c.trackers {
		for _, w := range windows {
			if d, ok := tr.firstLiveIn(w); ok {
				rec = append(rec, d)
			} else {
				res.Missed++
			}
		}
	}
	if len(rec) > 0 {
		res.RecoverP50, res.RecoverP99, _ = percentiles(rec)
	}
	if _, err := c.restart(); err != nil { // for an orderly stop
		return res, err
	}
	return res, nil
}

// ---- link cuts ------------------------------------------------------------------------------

type linkCutResult struct {
	liveFraction
	Every time.Duration
}

func (r linkCutResult) String() string {
	return fmt.Sprintf("linkcut: %d peers × %d namespaces, every link cut every %v for %v, %s: peers live %.1f%% of the time (mean; lowest peer %.1f%%, p10 %.1f%%)",
		r.Peers, r.Namespaces, r.Every, r.Measured.Round(time.Second), r.Policy, 100*r.Mean, 100*r.Min, 100*r.P10)
}

// runLinkCut cuts every peer's TCP connection to the hub every `every` for `total`.
func runLinkCut(pol policy, peers, namespaces int, every, total time.Duration) (linkCutResult, error) {
	res := linkCutResult{liveFraction: liveFraction{Policy: pol, Peers: peers, Namespaces: namespaces}, Every: every}
	links := &cutter{}
	dialer := ws.WebSocketDialer{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: links.dial}}}
	c, err := startFaultCluster("linkcut", pol, peers, namespaces, dialer)
	if err != nil {
		return res, err
	}
	defer c.stop()
	start := time.Now()
	for time.Since(start) < total {
		time.Sleep(every)
		links.cut()
	}
	end := time.Now()
	res.Mean, res.Min, res.P10, res.Measured = fractions(c.trackers, [][2]time.Time{{start, end}}, end)
	return res, nil
}

// cutter dials TCP connections and closes all of them at once on cut.
type cutter struct {
	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.conns == nil {
		c.conns = map[net.Conn]struct{}{}
	}
	c.conns[conn] = struct{}{}
	c.mu.Unlock()
	return conn, nil
}

func (c *cutter) cut() {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for conn := range conns {
		_ = conn.Close()
	}
}
