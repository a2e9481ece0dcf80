package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/yjs"
)

// hubCluster is a hub cluster of three processes (embedded NATS, routes on loopback) and
// its peers, in one temporary directory. The cluster tests run in parallel with each
// other, after the package's other tests (most of their time is spent waiting: for
// elections, quorum probes, failovers).
type hubCluster struct {
	t      *testing.T
	dir    string
	routes []string // host:port of each node's route listener
	repl   []string // host:port of each node's /v1/replication
	hubs   []*proc
	peers  map[string]*proc
	extra  []string // further flags of every node
	// shipped: every node runs with the shipped defaults but for its addresses, its data
	// directory and the cluster's membership — the client listener on, no faster timers
	// (and extra: the credentials its editors use).
	shipped bool
	// prepare, when set, runs before the nodes start (to write their tokens files).
	prepare func(c *hubCluster)
	// natsClients, when set, is each node's --nats-client-listen address (for a test that
	// reads the cluster's JetStream state).
	natsClients []string
}

// newHubCluster starts n nodes, each with the flags extra too, and waits until each is
// ready.
func newHubCluster(t *testing.T, n int, extra ...string) *hubCluster {
	return startHubCluster(&hubCluster{t: t, dir: t.TempDir(), peers: map[string]*proc{}, extra: extra}, n)
}

// newShippedHubCluster starts n nodes as a user would, with the shipped defaults but for
// addresses, data directories, membership and the flags extra (see hubCluster.shipped);
// prepare, when set, runs before they start.
func newShippedHubCluster(t *testing.T, n int, prepare func(c *hubCluster), extra ...string) *hubCluster {
	return startHubCluster(&hubCluster{t: t, dir: t.TempDir(), peers: map[string]*proc{}, shipped: true, prepare: prepare, extra: extra}, n)
}

func startHubCluster(c *hubCluster, n int) *hubCluster {
	t := c.t
	for i := range n {
		c.routes = append(c.routes, freeAddr(t))
		c.repl = append(c.repl, freeAddr(t))
		p := &proc{t: t, name: fmt.Sprintf("hub-n%d", i+1), admin: "http://" + freeAddr(t),
			log: filepath.Join(c.dir, fmt.Sprintf("hub-n%d.log", i+1))}
		if c.shipped {
			p.client = freeAddr(t)
		}
		c.hubs = append(c.hubs, p)
	}
	if c.prepare != nil {
		c.prepare(c)
	}
	t.Cleanup(func() {
		if t.Failed() {
			procs := append([]*proc{}, c.hubs...)
			for _, p := range c.peers {
				procs = append(procs, p)
			}
			keep := os.Getenv("NOMICORE_E2E_LOGS") // a directory to keep the whole logs of a failed test in
			for _, p := range procs {
				t.Logf("--- log of %s:\n%s", p.name, tail(p.log, 40))
				if keep != "" {
					dir := filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
					if b, err := os.ReadFile(p.log); err == nil && os.MkdirAll(dir, 0o755) == nil {
						os.WriteFile(filepath.Join(dir, p.name+".log"), b, 0o644)
					}
				}
			}
		}
	})
	for i := range n {
		c.startHub(i)
	}
	for i := range n {
		c.waitReady(i, 60*time.Second)
	}
	return c
}

func (c *hubCluster) data(i int) string { return filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)) }

// startHub starts (or restarts, on the same ports and data) node i.
func (c *hubCluster) startHub(i int) {
	c.t.Helper()
	var routes []string
	for _, r := range c.routes {
		routes = append(routes, "nats://"+r)
	}
	p := c.hubs[i]
	p.args = []string{"serve", "--node-name", fmt.Sprintf("n%d", i+1),
		"--cluster-name", "e2e", "--cluster-listen", c.routes[i], "--cluster-routes", strings.Join(routes, ","),
		"--listen", c.repl[i], "--admin-listen", strings.TrimPrefix(p.admin, "http://"), "--data", c.data(i)}
	if c.natsClients != nil {
		p.args = append(p.args, "--nats-client-listen", c.natsClients[i])
	}
	if c.shipped {
		client := p.client
		if client == "" { // a node without an editor listener (cleared by the test's prepare)
			client = "off"
		}
		p.args = append(append(p.args, "--client-listen", client), c.extra...)
	} else {
		p.args = append(append(p.args, "--instance-id", "hub", "--tokens-poll", "200ms", "--client-listen", "off"), append(c.extra, fast...)...)
	}
	if err := p.start(); err != nil {
		c.t.Fatalf("%s: %v", p.name, err)
	}
}

// waitReady waits for /readyz 200 on node i (it has quorum).
func (c *hubCluster) waitReady(i int, d time.Duration) {
	c.t.Helper()
	eventually(c.t, d, c.hubs[i].name+" ready", func() error {
		status, b := c.hubs[i].api().do("GET", "/readyz", nil)
		if status != 200 {
			return fmt.Errorf("%d %s", status, b)
		}
		return nil
	})
}

// token adds a peer token on node 1 and gives every node the same tokens file.
func (c *hubCluster) token(peer string) string {
	c.t.Helper()
	out, err := exec.Command(bin.hub, "token", "add", "--data", c.data(0), "--peer", peer).Output()
	if err != nil {
		c.t.Fatalf("hub token add: %v", err)
	}
	tok := strings.TrimSpace(string(out))
	b, err := os.ReadFile(filepath.Join(c.data(0), "tokens.json"))
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 1; i < len(c.hubs); i++ {
		if err := os.WriteFile(filepath.Join(c.data(i), "tokens.json"), b, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	f := filepath.Join(c.dir, peer+".token")
	if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // every node reloads its tokens file (--tokens-poll)
	return f
}

// url is node i's replication endpoint.
func (c *hubCluster) url(i int) string { return "ws://" + c.repl[i] + "/v1/replication" }

// startPeer starts a peer with a target, given every node's endpoint, node i's first: it
// replicates through node i and fails over to the next node when that one is gone.
func (c *hubCluster) startPeer(name string, i int, ns string) *proc {
	c.t.Helper()
	var urls []string
	for k := range c.repl {
		urls = append(urls, "--hub-url", c.url((i+k)%len(c.repl)))
	}
	return c.startPeerWith(name, ns, urls...)
}

// startPeerOnly starts a peer with a target, given node i's endpoint alone.
func (c *hubCluster) startPeerOnly(name string, i int, ns string) *proc {
	c.t.Helper()
	return c.startPeerWith(name, ns, "--hub-url", c.url(i))
}

func (c *hubCluster) startPeerWith(name, ns string, urls ...string) *proc {
	c.t.Helper()
	return c.startPeerClients(name, ns, c.token(name), false, urls...)
}

// startPeerClients starts a peer with a target and the replication token in tokenFile;
// with clients, its client listener is on (p.client).
func (c *hubCluster) startPeerClients(name, ns, tokenFile string, clients bool, urls ...string) *proc {
	c.t.Helper()
	p := &proc{t: c.t, name: name, admin: "http://" + freeAddr(c.t), log: filepath.Join(c.dir, name+".log")}
	c.peers[name] = p
	listen := "off"
	if clients {
		p.client = freeAddr(c.t)
		listen = p.client
	}
	p.args = append(append([]string{"run", "--instance-id", name}, urls...), append([]string{
		"--token-file", tokenFile, "--admin-listen", strings.TrimPrefix(p.admin, "http://"),
		"--data", filepath.Join(c.dir, name), "--target", ns, "--client-listen", listen}, fast...)...)
	if err := p.start(); err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	return p
}

// signal sends sig to node i's process group.
func (c *hubCluster) signal(i int, sig syscall.Signal) {
	if err := syscall.Kill(-c.hubs[i].cmd.Process.Pid, sig); err != nil {
		c.t.Fatal(err)
	}
}

// TestE2E_Cluster_ServedByAllNodes: a namespace created on one node is served by all;
// writes through peers attached to different nodes and through every node's admin API
// converge everywhere; two nodes bumping one epoch at once — exactly one wins, every node
// and every peer sees the new epoch.
func TestE2E_Cluster_ServedByAllNodes(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 3)
	ns := c.hubs[0].api().createNamespace()
	var peers []*proc
	for i := range 3 {
		peers = append(peers, c.startPeer(fmt.Sprintf("peer-%d", i+1), i, ns))
	}
	for _, p := range peers {
		targetState(t, p, ns, "live")
	}
	want := map[string]any{}
	for i, h := range c.hubs {
		k := fmt.Sprintf("hub-%d", i+1)
		h.api().set(ns, map[string]any{k: float64(i)})
		want[k] = float64(i)
	}
	for i, p := range peers {
		k := fmt.Sprintf("peer-%d", i+1)
		p.api().set(ns, map[string]any{k: float64(10 + i)})
		want[k] = float64(10 + i)
	}
	converged(t, ns, want, append(append([]*proc{}, c.hubs...), peers...)...)
	// Every node lists the namespace and shows the sessions of its own peers.
	for i, h := range c.hubs {
		var st struct {
			ReplicationEpoch uint64
			Sessions         []struct{ PeerInstanceID string }
			Log              *struct{ LagRecords *uint64 } // how far behind the log this node is
		}
		h.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
		if st.ReplicationEpoch != 1 || len(st.Sessions) != 1 || st.Sessions[0].PeerInstanceID != fmt.Sprintf("peer-%d", i+1) ||
			st.Log == nil || st.Log.LagRecords == nil {
			t.Fatalf("%s: %+v", h.name, st)
		}
	}

	// Two nodes bump the epoch at the same moment, both expecting the current epoch: exactly
	// one wins, the other is 409 and wrote nothing — EPOCH_MISMATCH when the winner's bump
	// was made before the loser's node checked (after catching up with the log), CONFLICT
	// when both passed their check and the cluster's compare-and-set decided. No epoch is given out twice
	// and none is lost. Rounds go on until one reached the compare-and-set (at most 10).
	epoch := uint64(1)
	raced := false
	for round := 0; round < 10 && !raced; round++ {
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		bodies := make([]string, 2)
		start := make(chan struct{})
		body := []byte(fmt.Sprintf(`{"expectedEpoch":%d}`, epoch))
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s, b := c.hubs[i].api().do("POST", "/v1/namespaces/"+ns+"/epoch", body)
				statuses[i], bodies[i] = s, string(b)
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, s := range statuses {
			switch s {
			case 200:
				var r struct{ ReplicationEpoch uint64 }
				if err := json.Unmarshal([]byte(bodies[i]), &r); err != nil || r.ReplicationEpoch != epoch+1 {
					t.Fatalf("round %d: a winner answered %s (epoch was %d)", round, bodies[i], epoch)
				}
				winners++
			case 409:
				switch {
				case strings.Contains(bodies[i], `"CONFLICT"`):
					raced = true
				case strings.Contains(bodies[i], `"EPOCH_MISMATCH"`):
				default:
					t.Fatalf("round %d: the loser answered %s", round, bodies[i])
				}
			default:
				t.Fatalf("round %d: bump on %s: %d %s", round, c.hubs[i].name, s, bodies[i])
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d bumps won: %v %v", round, winners, statuses, bodies)
		}
		epoch++
		for _, h := range c.hubs {
			eventually(t, 20*time.Second, fmt.Sprintf("%s at epoch %d", h.name, epoch), func() error {
				var st struct{ ReplicationEpoch uint64 }
				h.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
				if st.ReplicationEpoch != epoch {
					return fmt.Errorf("epoch %d", st.ReplicationEpoch)
				}
				return nil
			})
		}
	}
	if !raced {
		t.Fatal("in 10 rounds the two bumps never both reached the cluster's compare-and-set")
	}
	// Every peer's session of epoch 1 was fenced (docs/protocol.md#identity-fencing): the
	// replicas are conflicted.
	for _, p := range peers {
		targetState(t, p, ns, "conflicted")
	}
}

// TestE2E_Cluster_KillUnderWriteLoad: SIGKILL of a node while writes go on through every
// node's admin API and through peers loses no acknowledged write. Its peer that lists every
// node fails over to another node and reconciles there — no new bootstrap; its peer that
// knows only that node waits, is refused until the restarted node caught up (503 at the
// upgrade), then reconciles with it; the restarted node catches up with every write.
func TestE2E_Cluster_KillUnderWriteLoad(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 3)
	ns := c.hubs[0].api().createNamespace()
	// peer-1 and peer-2 list the three nodes (node 1, node 2 first); peer-3 knows node 2 only.
	peers := []*proc{c.startPeer("peer-1", 0, ns), c.startPeer("peer-2", 1, ns), c.startPeerOnly("peer-3", 1, ns)}
	for _, p := range peers {
		targetState(t, p, ns, "live")
	}
	const bootstraps = `nomicore_snapshot_bytes_count{side="peer",type="bootstrap-imported"}`
	for _, p := range peers {
		if n := p.api().metric(bootstraps); n != 1 {
			t.Fatalf("%s imported %v snapshots, want 1", p.name, n)
		}
	}
	var mu sync.Mutex
	acked := map[string]any{} // key → value of every write answered 204
	var stop atomic.Bool
	var wg sync.WaitGroup
	writer := func(name string, p *proc) {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			k := fmt.Sprintf("%s-%d", name, i)
			if setOnce(p, ns, k, float64(i)) {
				mu.Lock()
				acked[k] = float64(i)
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, h := range c.hubs {
		wg.Add(1)
		go writer(fmt.Sprintf("hub%d", i+1), h)
	}
	for _, p := range peers[:2] {
		wg.Add(1)
		go writer(p.name, p)
	}
	time.Sleep(2 * time.Second)
	c.hubs[1].kill() // SIGKILL of node 2 (peer-2 and peer-3 replicate through it)
	// peer-2 fails over to node 3, its next endpoint, and goes on replicating there.
	eventually(t, 60*time.Second, "peer-2 live on node 3", func() error {
		var st struct{ Hub struct{ URL, State string } }
		peers[1].api().json("GET", "/v1/status", nil, 200, &st)
		if st.Hub.URL != c.url(2) || st.Hub.State != "ready" {
			return fmt.Errorf("connected to %s, %s", st.Hub.URL, st.Hub.State)
		}
		if s := sessionOf(t, c.hubs[2], ns, "peer-2"); s != "live" {
			return fmt.Errorf("its session on node 3 is %q", s)
		}
		return nil
	})
	c.startHub(1)
	c.waitReady(1, 60*time.Second)
	targetState(t, peers[2], ns, "live") // peer-3, back on the restarted node 2
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 50 {
		t.Fatalf("only %d writes were acknowledged", len(acked))
	}
	for _, p := range peers {
		targetState(t, p, ns, "live")
	}
	converged(t, ns, acked, append(append([]*proc{}, c.hubs...), peers...)...)
	// Every peer reconciled by state vectors: none imported a snapshot again.
	for _, p := range peers {
		if n := p.api().metric(bootstraps); n != 1 {
			t.Fatalf("%s imported %v snapshots, want still 1", p.name, n)
		}
	}
}

// TestE2E_Cluster_LogLeaderKilledMidBatch: the node leading the log stream of a namespace
// is killed (SIGKILL) while every node takes concurrent writes to that namespace, so that each publishes them in batches with two
// messages in flight: no acknowledged write is lost — every node, the killed one restarted
// included, ends with every write it acknowledged and the same document.
func TestE2E_Cluster_LogLeaderKilledMidBatch(t *testing.T) {
	t.Parallel()
	c := startHubCluster(&hubCluster{t: t, dir: t.TempDir(), peers: map[string]*proc{}, prepare: func(c *hubCluster) {
		for range c.hubs {
			c.natsClients = append(c.natsClients, freeAddr(t))
		}
	}}, 3)
	nc, err := nats.Connect("nats://" + c.natsClients[0])
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	// The node leading the namespace's log stream, which its entry names ("log": k for
	// NOMICORE_LOG_k, none for NOMICORE_LOG).
	ns, stream := c.hubs[1].api().createNamespace(), "NOMICORE_LOG"
	entries, err := js.KeyValue(ctx(), "nomicore_entries")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := entries.Get(ctx(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var placed struct{ Log int }
	if err := json.Unmarshal(entry.Value(), &placed); err != nil {
		t.Fatalf("the namespace's entry %s: %v", entry.Value(), err)
	}
	if placed.Log > 0 {
		stream = fmt.Sprintf("NOMICORE_LOG_%d", placed.Log)
	}
	victim := -1
	eventually(t, 20*time.Second, "a leader of "+stream, func() error {
		st, err := js.Stream(ctx(), stream)
		if err != nil {
			return err
		}
		if st.CachedInfo().Cluster == nil {
			return fmt.Errorf("no cluster information")
		}
		leader := st.CachedInfo().Cluster.Leader
		for i := range c.hubs {
			if leader == fmt.Sprintf("n%d", i+1) {
				victim = i
				return nil
			}
		}
		return fmt.Errorf("leader %q", leader)
	})
	nc.Close()
	status, base := c.hubs[0].api().do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("reading the namespace: %d", status)
	}

	var mu sync.Mutex
	acked := map[string]any{} // key → value of every write answered 204
	var stop atomic.Bool
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	writer := func(name string, p *proc) {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			k := fmt.Sprintf("%s-%d", name, i)
			update, err := mapSet(base, k, float64(i))
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := client.Post(p.admin+"/v1/namespaces/"+ns+"/update", "application/octet-stream", strings.NewReader(string(update)))
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == 204 {
				mu.Lock()
				acked[k] = float64(i)
				mu.Unlock()
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	for i, h := range c.hubs {
		for j := range 12 {
			wg.Add(1)
			go writer(fmt.Sprintf("n%d-w%d", i+1, j), h)
		}
	}
	eventually(t, 30*time.Second, "writes under way", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 300 {
			return fmt.Errorf("%d acknowledged", len(acked))
		}
		return nil
	})
	c.hubs[victim].kill()
	mu.Lock()
	atKill := len(acked)
	mu.Unlock()
	eventually(t, 60*time.Second, "writes acknowledged after the kill", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < atKill+300 {
			return fmt.Errorf("%d acknowledged, %d at the kill", len(acked), atKill)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	records, messages := 0.0, 0.0
	for i, h := range c.hubs {
		if i != victim {
			records += h.api().metric("nomicore_cluster_publish_batch_records_sum")
			messages += h.api().metric("nomicore_cluster_publish_batch_records_count")
		}
	}
	if messages == 0 || records < 1.5*messages {
		t.Fatalf("the survivors published %v records in %v messages: hardly batched", records, messages)
	}
	t.Logf("%s led by n%d, killed after %d writes were acknowledged, %d in all; the survivors published %v records in %v messages",
		stream, victim+1, atKill, len(acked), records, messages)
	c.startHub(victim)
	c.waitReady(victim, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	converged(t, ns, acked, c.hubs...)
}

// setOnce writes key=value through p's admin API; it reports whether the write was
// acknowledged (204).
func setOnce(p *proc, ns, key string, value any) bool {
	client := &http.Client{Timeout: 15 * time.Second}
	if p.adminHTTP != nil {
		client.Transport = p.adminHTTP.Transport // its admin token, or its CA
	}
	resp, err := client.Get(p.admin + "/v1/namespaces/" + ns + "/update")
	if err != nil {
		return false
	}
	state, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		return false
	}
	update, err := mapSet(state, key, value)
	if err != nil {
		return false
	}
	resp, err = client.Post(p.admin+"/v1/namespaces/"+ns+"/update", "application/octet-stream", strings.NewReader(string(update)))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 204
}

// TestE2E_Cluster_MinorityRefusesWrites: a node whose two siblings are stopped (SIGSTOP)
// is not ready, refuses writes (503 PERSISTENCE_DEGRADED from its admin API; its peer's
// update is refused and kept by the peer), serves reads, and recovers by itself after
// SIGCONT — the peer's write then reaches every node, the peer not restarted.
func TestE2E_Cluster_MinorityRefusesWrites(t *testing.T) {
	t.Parallel()
	// Nodes that count themselves without quorum after 6 s (the default is 12 s).
	c := newHubCluster(t, 3, "--cluster-quorum-timeout", "6s")
	ns := c.hubs[0].api().createNamespace()
	peer := c.startPeer("peer-1", 0, ns)
	targetState(t, peer, ns, "live")
	c.hubs[0].api().set(ns, map[string]any{"before": true})
	converged(t, ns, map[string]any{"before": true}, c.hubs[0], peer)

	c.signal(1, syscall.SIGSTOP)
	c.signal(2, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			c.signal(1, syscall.SIGCONT)
			c.signal(2, syscall.SIGCONT)
		}
	}()
	n1 := c.hubs[0].api()
	eventually(t, 30*time.Second, "node 1 not ready without quorum", func() error {
		status, b := n1.do("GET", "/readyz", nil)
		if status != 503 || !strings.Contains(string(b), "quorum") {
			return fmt.Errorf("%d %s", status, b)
		}
		return nil
	})
	status, b := n1.do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("read without quorum: %d %s", status, b)
	}
	update, err := mapSet(b, "during", true)
	if err != nil {
		t.Fatal(err)
	}
	status, b = n1.do("POST", "/v1/namespaces/"+ns+"/update", update)
	if status != 503 || !strings.Contains(string(b), "PERSISTENCE_DEGRADED") {
		t.Fatalf("write without quorum: %d %s", status, b)
	}
	if notes, status := n1.notes(ns); status != 200 || notes["before"] != true || notes["during"] != nil {
		t.Fatalf("doc without quorum: %d %v", status, notes)
	}
	// The peer's write is durable on the peer, refused by its node.
	peer.api().set(ns, map[string]any{"from-peer": true})
	time.Sleep(time.Second)
	if notes, _ := n1.notes(ns); notes["from-peer"] != nil {
		t.Fatalf("node 1 took a write without quorum: %v", notes)
	}

	c.signal(1, syscall.SIGCONT)
	c.signal(2, syscall.SIGCONT)
	stopped = false
	c.waitReady(0, 60*time.Second)
	n1.set(ns, map[string]any{"after": true})
	// PERSISTENCE_DEGRADED failed the peer's namespace (docs/protocol.md#namespace-errors:
	// fatal, retry after recovery); the peer retries it by itself, with backoff, and its
	// write, kept in its store, reaches every node.
	converged(t, ns, map[string]any{"before": true, "from-peer": true, "after": true}, append([]*proc{peer}, c.hubs...)...)
}

// mapSet returns an update that sets key in the root map "notes", made by a fresh client
// on the given document state.
func mapSet(state []byte, key string, value any) ([]byte, error) {
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return nil, err
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	defer unsub()
	var err error
	doc.Transact(nil, func(*yjs.Transaction) { err = doc.GetMap("notes").Set(key, value) })
	return update, err
}

// TestE2E_Cluster_LargeDocuments: chunked transfers through a cluster. A document of
// several MiB written through one node (in writes of nearly 4 MiB, each one record of the
// log) bootstraps a fresh peer attached to another node (a chunked snapshot, far over the
// 512 KiB of one message); a write of nearly 4 MiB through that peer reaches its node as a
// chunked live update and, through the log, a peer attached to the third node as a chunked
// live update too; every node and peer ends with the same state.
func TestE2E_Cluster_LargeDocuments(t *testing.T) {
	t.Parallel()
	size := 24 << 20
	if raceEnabled || testing.Short() {
		size = 3 << 20
	}
	c := newHubCluster(t, 3)
	ns := c.hubs[0].api().createNamespace()
	writeText(t, c.hubs[0], ns, size, 4<<20, 'a')
	a := c.startPeer("peer-a", 1, ns)
	targetState(t, a, ns, "live")
	sameState(t, ns, 60*time.Second, c.hubs[0], a, c.hubs[1], c.hubs[2])
	if n := textLen(t, a, ns); n != size {
		t.Fatalf("peer-a's text: %d bytes, want %d", n, size)
	}
	finished := findLine(logLines(t, a), map[string]any{"msg": "replication transfer finished", "kind": "snapshot"})
	if finished == nil || finished["bytes"].(float64) < float64(size) {
		t.Fatalf("peer-a did not receive a chunked snapshot of the document: %v", finished)
	}
	b := c.startPeer("peer-b", 2, ns)
	targetState(t, b, ns, "live")

	writeText(t, a, ns, (4<<20)-8192, (4<<20)-4096, 'w')
	sameState(t, ns, 60*time.Second, c.hubs[0], a, b, c.hubs[1], c.hubs[2])
	if n := textLen(t, b, ns); n != size+(4<<20)-8192 {
		t.Fatalf("peer-b's text: %d bytes, want %d", n, size+(4<<20)-8192)
	}
	for _, m := range []struct {
		p      *proc
		series string
	}{
		{c.hubs[1], `nomicore_chunked_transfers_total{side="hub",type="chunked-update-applied"}`},
		{b, `nomicore_chunked_transfers_total{side="peer",type="chunked-update-applied"}`},
	} {
		if got := m.p.api().metric(m.series); got != 1 {
			t.Fatalf("%s %s = %v, want 1", m.p.name, m.series, got)
		}
	}
}
