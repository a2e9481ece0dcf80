// Command benchrepl runs the replication benchmarks and prints their figures:
//
//   - fan-out: 20 peers on one namespace, each writing 500 small updates as fast as the
//     windows allow: propagation latency p50/p99 and delivered updates per second;
//   - namespaces: 200 namespaces × 2 peers × 50 updates: wall time and hub CPU;
//   - bootstrap: a 400 KB document to a fresh peer: time;
//
// and, with -workload naming them (not part of "all"):
//
//   - idle: 10,000 idle peer connections on one hub: hub memory per connection;
//   - scale: 1,000 peers × 10 namespaces started at once: time until all live;
//   - cluster: a hub cluster of three nodes against a single hub — write-to-ACK and
//     write-to-durable latency, and the load time of a namespace (see clusterResult);
//   - clusterfanout: the fan-out on a single hub, on a hub cluster of three node processes
//     with every peer attached to one node, and with the peers spread over the three:
//     propagation p50/p99 and the hub processes' CPU per delivery;
//   - failover: peers given the three nodes' URLs, all attached to one, which is killed: how
//     long until each has all its targets live again on another node, the node killed being
//     the leader of the namespaces' log streams, then one leading none of them (-repeats
//     times each, medians);
//   - backup: a hub binary whose store holds -store-mib (1 GiB) of documents, written to through its admin
//     API while `hub backup` copies it: the store's and the backup's size, the backup's
//     time, and the writes' latency without a backup and during it (the longest is the
//     pause a backup causes);
//   - large: the hub and peer binaries with documents of 1, 8 and 32 MiB — a fresh peer's
//     time to go live, four fresh peers at once (time, peak memory), a 4 MiB write to three
//     peers, and a 5 MiB document made of random inserts;
//   - feed: the hub binary's change feed and webhooks — writers posting small updates to
//     many namespaces, an SSE reader of GET /v1/changes (events per second, lag), the feed
//     read again from cursor 0 (events per second), and a webhook endpoint in this process
//     (delivery latency p50/p99);
//
// and the fault workloads, also only when named:
//
//   - storm: every peer live, the hub killed (SIGKILL) for an outage and restarted on the
//     same address and data: how long after it listens again each peer has all its targets
//     live (p50, p99, max), for each size (-storm 500x10,2000x1) and outage (-outages);
//   - crashloop: the hub killed -cycles times, up 3–5 s, down 0.5 s (-up-min, -up-max, -down): the fraction of the
//     hub's up time each peer is live (all its targets);
//   - linkcut: every peer's TCP connection cut every -cut-every for -cut-for: the fraction
//     of the time each peer is live.
//
// Each fault workload runs with the peers' default reconnect policy and the hub's admission
// control ("adaptive") and then with the protocol's backoff exactly
// (docs/protocol.md#backoff) and no admission control ("contract", the baseline), with the
// production backoff settings.
//
// The hub runs in a child process (this binary re-executed), so getrusage gives its CPU
// alone; the peers run in this process. Every instance has its own bbolt store in a
// temporary directory, and they talk over real WebSockets on loopback. The workload is
// kept stable so that other relays can be measured side by side with it.
//
//	benchrepl [-workload all|fanout|namespaces|bootstrap|cluster|clusterfanout|failover|large|feed|backup|idle|scale|storm|crashloop|linkcut[,…]]
//	          [-peers 20] [-updates 500] [-namespaces 200] [-ns-peers 2] [-ns-updates 50]
//	          [-doc-kb 400] [-runs 5] [-cluster-updates 500] [-load-updates 5000]
//	          [-failover-peers 200] [-failover-namespaces 2] [-failover-doc-kb 64] [-repeats 5]
//	          [-bin DIR] [-store-mib 1024] [-sizes 1,8,32] [-fresh 4] [-paste-peers 3]
//	          [-idle-conns 10000] [-scale-peers 1000] [-scale-namespaces 10]
//	          [-storm 500x10,2000x1] [-outages 5s,15s,30s] [-crash-peers 100] [-crash-namespaces 10]
//	          [-cycles 20] [-up-min 3s] [-up-max 5s] [-down 500ms] [-cut-peers 20] [-cut-namespaces 10] [-cut-every 5s] [-cut-for 120s]
//	          [-policies adaptive,contract] [-json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if spec := os.Getenv(hubEnv); spec != "" {
		if err := runHubChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "benchrepl hub:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchrepl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workload := fs.String("workload", "all", "all (fanout, namespaces, bootstrap), or a comma-separated list of fanout, namespaces, bootstrap, cluster, clusterfanout, failover, large, feed, idle, scale, storm, crashloop, linkcut, backup")
	peers := fs.Int("peers", 20, "fan-out: peers on the namespace")
	updates := fs.Int("updates", 500, "fan-out: updates each peer writes")
	namespaces := fs.Int("namespaces", 200, "namespaces workload: namespaces")
	nsPeers := fs.Int("ns-peers", 2, "namespaces workload: peers")
	nsUpdates := fs.Int("ns-updates", 50, "namespaces workload: updates per peer per namespace")
	docKB := fs.Int("doc-kb", 400, "bootstrap: document size in KiB")
	runs := fs.Int("runs", 5, "bootstrap: fresh peers, one after the other")
	idleConns := fs.Int("idle-conns", 10000, "idle: peer connections held by one hub")
	scalePeers := fs.Int("scale-peers", 1000, "scale: peers started at once")
	scaleNS := fs.Int("scale-namespaces", 10, "scale: namespaces every peer replicates")
	clusterUpdates := fs.Int("cluster-updates", 500, "cluster: sequential writes measured for each latency")
	loadUpdates := fs.Int("load-updates", 5000, "cluster: updates of the namespace whose load is timed")
	failoverPeers := fs.Int("failover-peers", 200, "failover: peers attached to the node that is killed")
	failoverNS := fs.Int("failover-namespaces", 2, "failover: namespaces, each replicated by every peer")
	failoverDocKB := fs.Int("failover-doc-kb", 64, "failover: text in each namespace, in KiB, kept in a snapshot (0: empty namespaces)")
	repeats := fs.Int("repeats", 5, "cluster, failover: repeats (the figures reported are their medians)")
	binDir := fs.String("bin", "", "large: the directory of the hub and peer binaries (default: build them, from the repository root)")
	largeSizes := fs.String("sizes", "1,8,32", "large: document sizes in MiB")
	fresh := fs.Int("fresh", 4, "large: fresh peers bootstrapping the largest document at once")
	feedNS := fs.Int("feed-namespaces", 50, "feed: namespaces written")
	feedWriters := fs.Int("feed-writers", 8, "feed: writers posting updates at once")
	feedFor := fs.Duration("feed-for", 10*time.Second, "feed: how long the writers write")
	feedDebounce := fs.Duration("feed-debounce", 0, "feed: the hub's --webhook-debounce")
	pastePeers := fs.Int("paste-peers", 3, "large: live peers a 4 MiB write goes to")
	storms := fs.String("storm", "500x10,2000x1", "storm: sizes, PEERSxNAMESPACES, comma-separated")
	outages := fs.String("outages", "5s,15s,30s", "storm: hub outages, comma-separated")
	crashPeers := fs.Int("crash-peers", 100, "crashloop: peers")
	crashNS := fs.Int("crash-namespaces", 10, "crashloop: namespaces, each replicated by every peer")
	cycles := fs.Int("cycles", 20, "crashloop: hub crashes")
	upMin := fs.Duration("up-min", 3*time.Second, "crashloop: shortest time the hub is up")
	upMax := fs.Duration("up-max", 5*time.Second, "crashloop: longest time the hub is up")
	down := fs.Duration("down", 500*time.Millisecond, "crashloop: time the hub is down")
	cutPeers := fs.Int("cut-peers", 20, "linkcut: peers")
	cutNS := fs.Int("cut-namespaces", 10, "linkcut: namespaces, each replicated by every peer")
	cutEvery := fs.Duration("cut-every", 5*time.Second, "linkcut: time between cuts")
	cutFor := fs.Duration("cut-for", 120*time.Second, "linkcut: how long the links flap")
	policies := fs.String("policies", "adaptive,contract", "fault workloads: the policies to run, adaptive and/or contract (the baseline)")
	storeMiB := fs.Int("store-mib", 1024, "backup: MiB of documents in the hub's store")
	asJSON := fs.Bool("json", false, "print one JSON object per workload")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the benchmark and its in-process hubs and peers) to this file")
	blockProfile := fs.String("blockprofile", "", "write a profile of where this process's goroutines blocked to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stopProfiles, err := startProfiles(*cpuProfile, *blockProfile)
	if err != nil {
		fmt.Fprintln(stderr, "benchrepl:", err)
		return 2
	}
	defer stopProfiles()
	selected := map[string]bool{}
	for _, w := range strings.Split(*workload, ",") {
		switch w = strings.TrimSpace(w); w {
		case "all":
			selected["fanout"], selected["namespaces"], selected["bootstrap"] = true, true, true
		case "fanout", "namespaces", "bootstrap", "cluster", "clusterfanout", "failover", "large", "feed", "idle", "scale", "storm", "crashloop", "linkcut", "backup":
			selected[w] = true
		default:
			fmt.Fprintf(stderr, "benchrepl: unknown workload %q\n", w)
			return 2
		}
	}
	var pols []policy
	for _, p := range strings.Split(*policies, ",") {
		switch policy(strings.TrimSpace(p)) {
		case adaptive:
			pols = append(pols, adaptive)
		case contract:
			pols = append(pols, contract)
		default:
			fmt.Fprintf(stderr, "benchrepl: unknown policy %q (adaptive, contract)\n", p)
			return 2
		}
	}
	sizes, err := parseSizes(*storms)
	if err != nil {
		fmt.Fprintln(stderr, "benchrepl: -storm:", err)
		return 2
	}
	if *upMin <= 0 || *upMax < *upMin || *down < 0 {
		fmt.Fprintln(stderr, "benchrepl: want 0 < -up-min ≤ -up-max and -down ≥ 0")
		return 2
	}
	var outageList []time.Duration
	for _, o := range strings.Split(*outages, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(o))
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "benchrepl: -outages: %q is not a duration\n", o)
			return 2
		}
		outageList = append(outageList, d)
	}
	report := func(name string, r fmt.Stringer) {
		if *asJSON {
			b, _ := json.Marshal(map[string]any{"workload": name, "result": r})
			fmt.Fprintln(stdout, string(b))
			return
		}
		fmt.Fprintln(stdout, r)
	}
	ok := true
	if selected["fanout"] {
		r, err := runFanout(*peers, *updates)
		if err != nil {
			fmt.Fprintln(stderr, "fan-out:", err)
			ok = false
		} else {
			report("fanout", r)
		}
	}
	if selected["namespaces"] {
		r, err := runNamespaces(*namespaces, *nsPeers, *nsUpdates)
		if err != nil {
			fmt.Fprintln(stderr, "namespaces:", err)
			ok = false
		} else {
			report("namespaces", r)
		}
	}
	if selected["bootstrap"] {
		r, err := runBootstrap(*docKB<<10, *runs)
		if err != nil {
			fmt.Fprintln(stderr, "bootstrap:", err)
			ok = false
		} else {
			report("bootstrap", r)
		}
	}
	if selected["idle"] {
		r, err := runIdle(*idleConns)
		if err != nil {
			fmt.Fprintln(stderr, "idle:", err)
			ok = false
		} else {
			report("idle", r)
		}
	}
	if selected["scale"] {
		r, err := runScale(*scalePeers, *scaleNS)
		if err != nil {
			fmt.Fprintln(stderr, "scale:", err)
			ok = false
		} else {
			report("scale", r)
		}
	}
	if selected["cluster"] {
		r, err := runCluster(*clusterUpdates, *loadUpdates, *repeats)
		if err != nil {
			fmt.Fprintln(stderr, "cluster:", err)
			ok = false
		} else {
			report("cluster", r)
		}
	}
	if selected["clusterfanout"] {
		r, err := runClusterFanout(*peers, *updates)
		if err != nil {
			fmt.Fprintln(stderr, "cluster fan-out:", err)
			ok = false
		} else {
			report("clusterfanout", r)
		}
	}
	if selected["failover"] {
		r, err := runFailover(*failoverPeers, *failoverNS, *failoverDocKB<<10, *repeats)
		if err != nil {
			fmt.Fprintln(stderr, "failover:", err)
			ok = false
		} else {
			report("failover", r)
		}
	}
	if selected["backup"] {
		r, err := runBackup(*binDir, *storeMiB, 15*time.Second)
		if err != nil {
			fmt.Fprintln(stderr, "backup:", err)
			ok = false
		} else {
			report("backup", r)
		}
	}
	if selected["large"] {
		var mibs []int
		for _, f := range strings.Split(*largeSizes, ",") {
			if strings.TrimSpace(f) == "" {
				continue // -sizes "": the bigdoc part alone (with -fresh 0 -paste-peers 0)
			}
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "-sizes %q: want MiB counts like 1,8,32\n", *largeSizes)
				return 2
			}
			mibs = append(mibs, n)
		}
		r, err := runLarge(*binDir, mibs, *fresh, *pastePeers)
		if err != nil {
			fmt.Fprintln(stderr, "large:", err)
			ok = false
		} else {
			report("large", r)
		}
	}
	if selected["feed"] {
		r, err := runFeed(*binDir, *feedNS, *feedWriters, *feedFor, *feedDebounce)
		if err != nil {
			fmt.Fprintln(stderr, "feed:", err)
			ok = false
		} else {
			report("feed", r)
		}
	}
	if selected["storm"] {
		for _, sz := range sizes {
			for _, o := range outageList {
				got := map[policy]stormResult{}
				for _, pol := range pols {
					r, err := runStorm(pol, sz[0], sz[1], o)
					if err != nil {
						fmt.Fprintf(stderr, "storm %dx%d %v %s: %v\n", sz[0], sz[1], o, pol, err)
						ok = false
						continue
					}
					got[pol] = r
					report("storm", r)
				}
				if a, okA := got[adaptive]; okA && !*asJSON {
					if c, okC := got[contract]; okC {
						fmt.Fprintf(stdout, "storm: %d×%d, %v outage: adaptive/contract p50 %.2f, p99 %.2f, all live %.2f\n", sz[0], sz[1], o,
							ratio(a.P50, c.P50), ratio(a.P99, c.P99), ratio(a.Max, c.Max))
					}
				}
			}
		}
	}
	if selected["crashloop"] {
		for _, pol := range pols {
			r, err := runCrashLoop(pol, *crashPeers, *crashNS, *cycles, *upMin, *upMax, *down)
			if err != nil {
				fmt.Fprintf(stderr, "crashloop %s: %v\n", pol, err)
				ok = false
				continue
			}
			report("crashloop", r)
		}
	}
	if selected["linkcut"] {
		for _, pol := range pols {
			r, err := runLinkCut(pol, *cutPeers, *cutNS, *cutEvery, *cutFor)
			if err != nil {
				fmt.Fprintf(stderr, "linkcut %s: %v\n", pol, err)
				ok = false
				continue
			}
			report("linkcut", r)
		}
	}
	if !ok {
		return 1
	}
	return 0
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// parseSizes reads "500x10,2000x1": peers × namespaces.
func parseSizes(v string) ([][2]int, error) {
	var out [][2]int
	for _, s := range strings.Split(v, ",") {
		var p, n int
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%dx%d", &p, &n); err != nil || p < 1 || n < 1 {
			return nil, fmt.Errorf("%q is not PEERSxNAMESPACES", s)
		}
		out = append(out, [2]int{p, n})
	}
	return out, nil
}
