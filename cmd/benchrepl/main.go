// Command benchrepl runs the replication benchmarks and prints their figures:
//
//   - fan-out: 20 peers on one namespace, each writing 500 small updates as fast as the
//     windows allow: propagation latency p50/p99 and delivered updates per second;
//   - namespaces: 200 namespaces × 2 peers × 50 updates: wall time and hub CPU;
//   - bootstrap: a 400 KB document to a fresh peer: time;
//   - cluster: a hub cluster of three nodes against a single hub — write-to-ACK and
//     write-to-durable latency, and the load time of a namespace (see clusterResult).
//   - large (only when asked for): the hub and peer binaries with documents of 1, 8 and 32
//     MiB — a fresh peer's time to go live, four fresh peers at once (time, peak memory), a
//     4 MiB write to three peers, and a 5 MiB document made of random inserts.
//
// The hub runs in a child process (this binary re-executed), so getrusage gives its CPU
// alone; the peers run in this process. Every instance has its own bbolt store in a
// temporary directory, and they talk over real WebSockets on loopback. The workload is
// kept stable so that other relays can be measured side by side with it.
//
//	benchrepl [-workload all|fanout|namespaces|bootstrap|large] [-peers 20] [-updates 500]
//	          [-namespaces 200] [-ns-peers 2] [-ns-updates 50] [-doc-kb 400] [-runs 5]
//	          [-bin DIR] [-sizes 1,8,32] [-fresh 4] [-paste-peers 3] [-json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
	workload := fs.String("workload", "all", "all (fanout, namespaces and bootstrap), fanout, namespaces, bootstrap, cluster or large")
	peers := fs.Int("peers", 20, "fan-out: peers on the namespace")
	updates := fs.Int("updates", 500, "fan-out: updates each peer writes")
	namespaces := fs.Int("namespaces", 200, "namespaces workload: namespaces")
	nsPeers := fs.Int("ns-peers", 2, "namespaces workload: peers")
	nsUpdates := fs.Int("ns-updates", 50, "namespaces workload: updates per peer per namespace")
	docKB := fs.Int("doc-kb", 400, "bootstrap: document size in KiB")
	runs := fs.Int("runs", 5, "bootstrap: fresh peers, one after the other")
	binDir := fs.String("bin", "", "large: the directory of the hub and peer binaries (default: build them, from the repository root)")
	sizes := fs.String("sizes", "1,8,32", "large: document sizes in MiB")
	fresh := fs.Int("fresh", 4, "large: fresh peers bootstrapping the largest document at once")
	pastePeers := fs.Int("paste-peers", 3, "large: live peers a 4 MiB write goes to")
	asJSON := fs.Bool("json", false, "print one JSON object per workload")
	clusterUpdates := fs.Int("cluster-updates", 500, "cluster: sequential writes measured for each latency")
	loadUpdates := fs.Int("load-updates", 5000, "cluster: updates of the namespace whose load is timed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	report := func(name string, r fmt.Stringer) {
		if *asJSON {
			b, _ := json.Marshal(map[string]any{"workload": name, "result": r})
			fmt.Fprintln(stdout, string(b))
			return
		}
		fmt.Fprintln(stdout, r)
	}
	all := *workload == "all"
	ok := true
	if all || *workload == "fanout" {
		r, err := runFanout(*peers, *updates)
		if err != nil {
			fmt.Fprintln(stderr, "fan-out:", err)
			ok = false
		} else {
			report("fanout", r)
		}
	}
	if all || *workload == "namespaces" {
		r, err := runNamespaces(*namespaces, *nsPeers, *nsUpdates)
		if err != nil {
			fmt.Fprintln(stderr, "namespaces:", err)
			ok = false
		} else {
			report("namespaces", r)
		}
	}
	if all || *workload == "bootstrap" {
		r, err := runBootstrap(*docKB<<10, *runs)
		if err != nil {
			fmt.Fprintln(stderr, "bootstrap:", err)
			ok = false
		} else {
			report("bootstrap", r)
		}
	}
	if *workload == "cluster" { // not part of "all": it needs its own make target's time
		r, err := runCluster(*clusterUpdates, *loadUpdates)
		if err != nil {
			fmt.Fprintln(stderr, "cluster:", err)
			ok = false
		} else {
			report("cluster", r)
		}
	}
	if *workload == "large" {
		var mibs []int
		for _, f := range strings.Split(*sizes, ",") {
			if strings.TrimSpace(f) == "" {
				continue // -sizes "": the bigdoc part alone (with -fresh 0 -paste-peers 0)
			}
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "-sizes %q: want MiB counts like 1,8,32\n", *sizes)
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
	if !ok {
		return 1
	}
	return 0
}
