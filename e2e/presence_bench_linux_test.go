package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuSeconds is the CPU time (user + system) process pid has used so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces) start at ") ": utime and stime are
	// the 14th and 15th fields of the line, in clock ticks (100 a second on Linux).
	rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, err1 := strconv.ParseFloat(rest[11], 64)
	st, err2 := strconv.ParseFloat(rest[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return (ut + st) / 100
}

type benchLatency struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50"`
	P99   *float64 `json:"p99"`
}

func (l benchLatency) String() string {
	if l.P50 == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f / %.0f ms (%d changes heard)", *l.P50, *l.P99, l.Count)
}

// TestBench_PresenceCluster (make bench-presence): editors on one document of a hub cluster
// of three nodes, each moving its cursor rate times a second, spread over the three nodes,
// then all on one node: presence latency (move → heard by an editor of the same node, and of
// another node) p50/p99, the hubs' CPU and the bytes of presence the nodes published to NATS
// (NATS carries a subject between nodes only to those with interest: with every editor on
// one node, what it publishes stays in its own server). Reported, not asserted. NOMICORE_BENCH_PRESENCE_EDITORS (100), _RATE (5), _SECONDS (60) resize it.
func TestBench_PresenceCluster(t *testing.T) {
	if os.Getenv("NOMICORE_BENCH_PRESENCE") == "" {
		t.Skip("a benchmark: make bench-presence")
	}
	env := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv("NOMICORE_BENCH_PRESENCE_" + name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	editors, rate, seconds := env("EDITORS", 100), env("RATE", 5), env("SECONDS", 60)
	ag := startAgent(t)
	var clientTok string
	c := newShippedHubCluster(t, 3, func(c *hubCluster) {
		for i := range c.hubs {
			if err := os.MkdirAll(c.data(i), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		clientTok = runToken(t, bin.hub, c.data(0), "--client", "bench")
		b, err := os.ReadFile(filepath.Join(c.data(0), "tokens.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(c.hubs); i++ {
			if err := os.WriteFile(filepath.Join(c.data(i), "tokens.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}, "--max-connections-per-user", "1000")
	ns := c.hubs[0].api().createNamespace()
	type result struct {
		Moves  int          `json:"moves"`
		Local  benchLatency `json:"local"`
		Remote benchLatency `json:"remote"`
	}
	run := func(nodes int) (result, []float64, float64) {
		var urls []string
		for _, h := range c.hubs[:nodes] {
			urls = append(urls, "ws://"+h.client+"/v1/yjs")
		}
		cpu0 := make([]float64, len(c.hubs))
		bytes0 := 0.0
		for i, h := range c.hubs {
			cpu0[i] = cpuSeconds(t, h.cmd.Process.Pid)
			bytes0 += h.api().metric(`nomicore_presence_relayed_bytes_total{direction="out"}`)
		}
		var r result
		ag.must("presenceBench", map[string]any{"urls": urls, "ns": ns, "token": clientTok, "editors": editors,
			"rate": rate, "seconds": seconds, "timeoutMs": (seconds + 90) * 1000}, &r)
		cpu := make([]float64, len(c.hubs))
		bytes := -bytes0
		for i, h := range c.hubs {
			cpu[i] = (cpuSeconds(t, h.cmd.Process.Pid) - cpu0[i]) / float64(seconds)
			bytes += h.api().metric(`nomicore_presence_relayed_bytes_total{direction="out"}`)
		}
		time.Sleep(2 * time.Second) // the editors' removals settle before the next run
		return r, cpu, bytes
	}
	spread, spreadCPU, spreadBytes := run(3)
	one, oneCPU, oneBytes := run(1)
	t.Logf("presence: %d editors on one document, each moving its cursor %d times a second for %d s", editors, rate, seconds)
	t.Logf("| editors on | moves | latency, same node p50 / p99 | latency, other node p50 / p99 | hub CPU n1, n2, n3 (cores) | presence bytes published to NATS |")
	t.Logf("|---|---|---|---|---|---|")
	t.Logf("| three nodes | %d | %v | %v | %.2f, %.2f, %.2f | %.1f MB (%.0f KB/s) |", spread.Moves, spread.Local, spread.Remote,
		spreadCPU[0], spreadCPU[1], spreadCPU[2], spreadBytes/1e6, spreadBytes/1e3/float64(seconds))
	t.Logf("| one node (n1) | %d | %v | %v | %.2f, %.2f, %.2f | %.1f MB |", one.Moves, one.Local, one.Remote,
		oneCPU[0], oneCPU[1], oneCPU[2], oneBytes/1e6)
	if spread.Remote.Count == 0 {
		t.Fatal("no editor heard a move made on another node")
	}
}

// TestBench_PresenceHubPeers (make bench-presence): the same editors on one document spread
// over a hub and two peers (the hub relaying over the replication connections' presence
// extension), then all on the hub: latency p50/p99 on the same node and across nodes, the
// CPU of the hub and the peers, and the bytes of presence on the replication connections
// (the hub's, both directions). Reported, not asserted.
func TestBench_PresenceHubPeers(t *testing.T) {
	if os.Getenv("NOMICORE_BENCH_PRESENCE") == "" {
		t.Skip("a benchmark: make bench-presence")
	}
	env := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv("NOMICORE_BENCH_PRESENCE_" + name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	editors, rate, seconds := env("EDITORS", 100), env("RATE", 5), env("SECONDS", 60)
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub("--max-connections-per-user", "1000")
	ns := hub.api().createNamespace()
	tok := c.clientToken("hub", "bench")
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns, "--max-connections-per-user", "1000")
	b := c.startPeer("peer-b", c.tokenFile("peer-b", c.token("peer-b")), "--target", ns, "--max-connections-per-user", "1000")
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	// One client token per node: the peers keep their own tokens files.
	toks := []string{tok, c.clientToken("peer-a", "bench"), c.clientToken("peer-b", "bench")}
	nodes := []*proc{hub, a, b}
	type result struct {
		Moves  int          `json:"moves"`
		Local  benchLatency `json:"local"`
		Remote benchLatency `json:"remote"`
	}
	run := func(n int) (result, []float64, float64) {
		var urls []string
		for _, p := range nodes[:n] {
			urls = append(urls, "ws://"+p.client+"/v1/yjs")
		}
		cpu0 := make([]float64, len(nodes))
		for i, p := range nodes {
			cpu0[i] = cpuSeconds(t, p.cmd.Process.Pid)
		}
		bytes := func() float64 {
			return hub.api().metric(`nomicore_presence_relayed_bytes_total{direction="out"}`) +
				hub.api().metric(`nomicore_presence_relayed_bytes_total{direction="in"}`)
		}
		b0 := bytes()
		var r result
		ag.must("presenceBench", map[string]any{"urls": urls, "ns": ns, "tokens": toks[:n], "editors": editors,
			"rate": rate, "seconds": seconds, "timeoutMs": (seconds + 90) * 1000}, &r)
		cpu := make([]float64, len(nodes))
		for i, p := range nodes {
			cpu[i] = (cpuSeconds(t, p.cmd.Process.Pid) - cpu0[i]) / float64(seconds)
		}
		time.Sleep(2 * time.Second)
		return r, cpu, bytes() - b0
	}
	spread, spreadCPU, spreadBytes := run(3)
	one, oneCPU, oneBytes := run(1)
	t.Logf("presence: %d editors on one document, each moving its cursor %d times a second for %d s", editors, rate, seconds)
	t.Logf("| editors on | moves | latency, same node p50 / p99 | latency, other node p50 / p99 | CPU hub, peer-a, peer-b (cores) | presence bytes on the hub's replication connections |")
	t.Logf("|---|---|---|---|---|---|")
	t.Logf("| hub + 2 peers | %d | %v | %v | %.2f, %.2f, %.2f | %.1f MB (%.0f KB/s) |", spread.Moves, spread.Local, spread.Remote,
		spreadCPU[0], spreadCPU[1], spreadCPU[2], spreadBytes/1e6, spreadBytes/1e3/float64(seconds))
	t.Logf("| hub only | %d | %v | %v | %.2f, %.2f, %.2f | %.1f MB |", one.Moves, one.Local, one.Remote,
		oneCPU[0], oneCPU[1], oneCPU[2], oneBytes/1e6)
	if spread.Remote.Count == 0 {
		t.Fatal("no editor heard a move made on another node")
	}
}
