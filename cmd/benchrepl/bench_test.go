package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(hubEnv); spec != "" {
		// Re-executed as the hub child.
		if err := runHubChild(spec); err != nil {
			os.Stderr.WriteString("benchrepl hub: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestWorkloadsSmall runs each workload at a small size, so the harness keeps working: the
// figures are checked for consistency, not speed.
func TestWorkloadsSmall(t *testing.T) {
	f, err := runFanout(3, 20)
	if err != nil {
		t.Fatal(err)
	}
	if f.Deliveries != 3*20*2 || f.P50 <= 0 || f.P99 < f.P50 || f.Max < f.P99 || f.DeliveredPerS <= 0 {
		t.Fatalf("fan-out %+v", f)
	}
	n, err := runNamespaces(5, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if n.Wall <= 0 || n.HubCPU <= 0 {
		t.Fatalf("namespaces %+v", n)
	}
	b, err := runBootstrap(64<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b.SnapshotBytes < 64<<10 || b.Min <= 0 || b.Median < b.Min {
		t.Fatalf("bootstrap %+v", b)
	}
	for _, r := range []struct{ got, name string }{{f.String(), "fan-out: "}, {n.String(), "namespaces: "}, {b.String(), "bootstrap: "}} {
		if !strings.HasPrefix(r.got, r.name) || strings.Contains(r.got, "%!") {
			t.Fatalf("report %q", r.got)
		}
	}
}

// TestLargeWorkloadSmall runs the large-document workload (the binaries, built by it) with
// a 1 MiB document, one fresh peer and one paste peer, so the harness keeps working.
func TestLargeWorkloadSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(wd, "..", "..")) // the repository root, where runLarge builds
	r, err := runLarge("", []int{1}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GoLive) != 1 || r.GoLive[0].FromStart <= 0 || r.GoLive[0].FromAddTarget <= 0 || r.Bootstrap4 == nil ||
		r.Bootstrap4.HubPeakKB <= 0 || len(r.Bootstrap4.PeerPeakKB) != 1 || r.Paste == nil || r.Paste.AllApplied <= 0 || r.BigDoc == nil {
		t.Fatalf("large %+v", r)
	}
	if s := r.String(); !strings.HasPrefix(s, "large documents") || strings.Contains(s, "%!") {
		t.Fatalf("report %q", s)
	}
}

// The benchrepl workloads as Go benchmarks (one run each; use -benchtime 1x):
//
//	go test -run '^$' -bench . -benchtime 1x ./cmd/benchrepl

func BenchmarkFanout20Peers500Updates(b *testing.B) {
	for range b.N {
		r, err := runFanout(20, 500)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(r.P50), "p50-ms")
		b.ReportMetric(ms(r.P99), "p99-ms")
		b.ReportMetric(r.DeliveredPerS, "delivered/s")
		b.ReportMetric(ms(r.HubCPU), "hub-cpu-ms")
	}
}

func BenchmarkNamespaces200x2Peers50Updates(b *testing.B) {
	for range b.N {
		r, err := runNamespaces(200, 2, 50)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(r.Wall), "wall-ms")
		b.ReportMetric(ms(r.HubCPU), "hub-cpu-ms")
	}
}

func BenchmarkBootstrap400KB(b *testing.B) {
	for range b.N {
		r, err := runBootstrap(400<<10, 5)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(r.Median), "median-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestFaultWorkloadsSmall runs the fault workloads at a small size and short times (storm
// with both policies, crashloop and linkcut with one each), so the harness keeps working:
// the figures are checked for consistency, not speed.
func TestFaultWorkloadsSmall(t *testing.T) {
	for _, pol := range []policy{adaptive, contract} {
		s, err := runStorm(pol, 3, 2, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 || !strings.HasPrefix(s.String(), "storm: 3 peers × 2 namespaces") {
			t.Fatalf("storm %+v", s)
		}
	}
	c, err := runCrashLoop(adaptive, 3, 2, 2, 400*time.Millisecond, 600*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Measured < 800*time.Millisecond || c.Mean <= 0 || c.Mean > 1 || c.Min > c.Mean || c.P10 < c.Min {
		t.Fatalf("crashloop %+v", c)
	}
	l, err := runLinkCut(contract, 3, 2, 300*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Measured < time.Second || l.Mean <= 0 || l.Mean > 1 || l.Min > l.Mean {
		t.Fatalf("linkcut %+v", l)
	}
}

// TestFailoverWorkloadSmall runs the failover workload at a small size, so the harness of
// the cluster workloads (three node processes, peers given every node's URL) keeps
// working: every peer is live again on a surviving node, none bootstrapped again — with
// the leader of the namespace's log killed, and with another node killed.
func TestFailoverWorkloadSmall(t *testing.T) {
	r, err := runFailover(4, 1, 64<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) != 2 {
		t.Fatalf("failover %+v", r)
	}
	for _, c := range r.Cases {
		if len(c.Runs) != 1 {
			t.Fatalf("failover, %s: %+v", c.Name, c)
		}
		run := c.Runs[0]
		if run.P50 <= 0 || run.All < run.P99 || run.Moved[0]+run.Moved[1] != 4 || c.BootstrapsAfter != 0 || c.All != run.All {
			t.Fatalf("failover, %s: %+v", c.Name, c)
		}
	}
	if s := r.String(); !strings.HasPrefix(s, "failover: ") || strings.Contains(s, "%!") {
		t.Fatalf("report %q", s)
	}
}
