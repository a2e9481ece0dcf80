# Nomicore — build, run and test targets. See README.md.
SHELL := /bin/bash
GO    ?= go

# Every target builds with the Go release go.mod names on its toolchain line (the latest
# patch release: govulncheck in `make lint` fails on the standard library of an older one),
# fetched from the module proxy when the installed Go is another, even where its go.env
# says GOTOOLCHAIN=local. GOTOOLCHAIN=local in the environment builds with the installed Go.
GOTOOLCHAIN ?= auto
export GOTOOLCHAIN

# The B4 editing trace for the yjs benchmarks (GUIDE §10). Read in place, never copied.
# It lies in shared/data beside the repository, or two levels up from a worktree kept in
# a folder beside it.
B4_TRACE ?= $(firstword $(wildcard $(abspath $(CURDIR)/../shared/data/b4-editing-trace.json) $(abspath $(CURDIR)/../../shared/data/b4-editing-trace.json)))
export B4_TRACE

# JavaScript packages the tests use as independent oracles and real clients (npm ci).
JS_DIRS   := testdata/golden/gen testdata/oracle e2e/yws e2e/hocuspocus/v3 e2e/hocuspocus/v4
JS_STAMPS := $(foreach d,$(JS_DIRS),$(if $(wildcard $(d)/package-lock.json),$(d)/node_modules/.package-lock.json))

# Binaries record the VCS revision they were built from (hub --version) when git can tell it.
BUILD_FLAGS   ?= -buildvcs=auto
BIN           ?= bin
FUZZTIME      ?= 10s
B4_REPEATS    ?= 5
TEST_TIMEOUT  ?= 25m
TEST_FLAGS    ?=

.PHONY: all vulncheck vulncheck-db build run demo test test-race test-short test-yjs-long soak soak-cluster fuzz fuzz-long chaos golden bench bench-yjs bench-replication bench-relay bench-joinstorm bench-cluster bench-feed bench-presence bench-large bench-backup bench-reconnect bench-slowlink editor-bundle dashboard-screenshots lint fmt js-deps clean

all: lint build test

## build: compile every package and the hub, peer and nmcr binaries into bin/
build:
	$(GO) build ./...
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/ ./cmd/...

## run: a hub on embedded defaults (loopback listeners, bbolt under ./nomicore-data/hub);
## Ctrl-C stops it in order and make exits 0. `set -m` runs the hub as a job of its own,
## in the terminal's foreground: Ctrl-C interrupts the hub only, not make, which would
## otherwise report the interrupt as a failure. (`; exit $$?` keeps the shell from exec-ing
## the hub in its own place, which would leave it in make's process group.)
run:
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/ ./cmd/hub
	@set -m; $(BIN)/hub serve; exit $$?

## demo: the README walkthrough, automated: a hub, two tokens, a namespace, two peers, a
## write through one peer read from the other; exits 0 only if both peers converged. Then,
## so that its editor pages can be opened, it keeps running: until Enter on a terminal,
## until Ctrl-C with KEEP=1; KEEP=0 (or no terminal, as in CI) stops it at once. As for
## run, `set -m` gives the script the terminal's foreground, so Ctrl-C stops the demo,
## which exits 0, and not make.
demo:
	@set -m; ./scripts/demo.sh; exit $$?

## js-deps: install the pinned JS oracle packages (skipped loudly without node/npm)
js-deps: $(JS_STAMPS)

%/node_modules/.package-lock.json: %/package-lock.json %/package.json
	@if command -v npm >/dev/null 2>&1; then \
		echo "npm ci in $*"; (cd $* && npm ci --no-audit --no-fund --loglevel=error); \
	else \
		echo "WARNING: npm not found: oracle tests under $* will be skipped (set NOMICORE_REQUIRE_ORACLE=1 to fail instead)"; \
	fi

## test: the whole suite with the race detector (what .ci/run runs), then the store
## corruption tests without it (-race's pointer checks turn a damaged bbolt page into a
## fatal error instead of the recoverable panic the store contains), the large-document
## e2e tests at full size (32 MiB with the shipped defaults, 64 MiB with raised flags) and
## the yjs differential tests on JS histories of several MiB, which the race detector makes
## minutes long, and every yjs test again with struct lists chunked by 4 structs (the build
## tag yjs_smallchunks; 500 random JS histories instead of 2,000)
test: js-deps
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	$(GO) test -count=1 -run 'Corrupt|TestListPagesThroughManyNamespaces' ./persistence/
	$(GO) test -count=1 -run 'TestE2E_(LargeDocuments|64MiB)' ./e2e/
	$(GO) test -count=1 -run 'Test(Restore)?LargeJSHistories' ./yjs/
	NOMICORE_YJS_HISTORIES=500 $(GO) test -count=1 -tags yjs_smallchunks ./yjs/

## test-race: same as test (kept as an explicit name)
test-race: test

## test-short: a quick loop for development (no race detector, -short)
test-short: js-deps
	$(GO) test -short -count=1 ./...

## test-yjs-long: the yjs differential tests on YJS_LONG_COUNT (3) JS histories of about
## 20 MiB each (3 to 6 authors, hundreds of thousands of structs), every path; the histories
## are made once by node (about 10 minutes each) and kept under $$TMPDIR/nomicore-yjs-histories
## (about 180 MiB each)
YJS_LONG_COUNT ?= 3
test-yjs-long: js-deps
	set -o pipefail; NOMICORE_YJS_LARGE=long NOMICORE_YJS_LARGE_COUNT=$(YJS_LONG_COUNT) $(GO) test -count=1 -timeout 240m -run TestLargeJSHistories -v ./yjs/ | grep -E -v '^=== (RUN|PAUSE|CONT)'

## soak-cluster: the hub cluster's tests over and over (three embedded NATS servers in one
## process, and three hub processes with peers: kills, stops, epoch races), CLUSTER_COUNT times
CLUSTER_COUNT ?= 10
soak-cluster:
	$(GO) test -race -count=$(CLUSTER_COUNT) -timeout 120m ./cluster/
	$(GO) test -race -count=$(CLUSTER_COUNT) -timeout 120m -run 'TestE2E_Cluster' ./e2e/

## dashboard-screenshots: the README's dashboard screenshots (docs/dashboard-hub.png,
## docs/dashboard-peer.png), taken by the browser tests in headless Chromium; set
## NOMICORE_ARTIFACTS=DIR on any test run to keep every screenshot the browser tests take
dashboard-screenshots:
	NOMICORE_DASHBOARD_DOCS=1 $(GO) test -count=1 -run 'TestE2E_Dashboard$$' ./e2e/

## fuzz: a bounded smoke run of every fuzz target (FUZZTIME each)
fuzz: js-deps
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## fuzz-long: every fuzz target for FUZZTIME_LONG (30m) each — 29 runs, 14.5 hours in all (the
## list and a summary are in scripts/fuzz.sh's output); a failing input is written under the
## package's testdata/fuzz. FUZZ_MATCH='^\./yjs ' (a regular expression on "package target")
## runs a part of it, for a machine that cannot give it that long at once
FUZZTIME_LONG ?= 30m
fuzz-long: js-deps
	FUZZTIME=$(FUZZTIME_LONG) ./scripts/fuzz.sh

## chaos: the long fault-injection run — CHAOS_CYCLES (1000) kill -9 cycles of the hub and its
## peers under write load, then flapping links for CHAOS_FLAP (10m) — and its summary:
## cycles, acknowledged writes, lost (must be 0). About 25 minutes; scripts/chaos.sh says more.
CHAOS_CYCLES ?= 1000
CHAOS_FLAP   ?= 10m
chaos:
	CHAOS_CYCLES=$(CHAOS_CYCLES) CHAOS_FLAP=$(CHAOS_FLAP) ./scripts/chaos.sh

## soak: the long crash and corruption runs of the store (300 SIGKILLs, 3,000 damaged copies)
soak:
	$(GO) test -count=1 -timeout 60m -run 'TestS21|Corrupt' ./persistence/ -args -long

## golden: regenerate the golden frame and lib0 vectors with the independent JS generators,
## and the Hocuspocus frames with the real @hocuspocus/provider and @hocuspocus/server
golden: js-deps
	cd testdata/golden/gen && npm ci --no-audit --no-fund --loglevel=error && node gen.mjs
	node lib0/testdata/gen-vectors.mjs testdata/golden/gen/node_modules > lib0/testdata/vectors.json
	node e2e/hocuspocus/golden.mjs > yws/hocuspocus/testdata/frames.json

## editor-bundle: rebuild the editor pages' scripts (yws/editor/yjs-bundle.js, and
## yws/editor/tiptap-bundle.js of the rich-text page) from the pinned npm packages of e2e/yws,
## byte for byte (TestEditorBundleIsUpToDate checks it)
editor-bundle: js-deps
	e2e/yws/bundle/build.sh

## bench: every Go benchmark (figures for the issue notes)
bench: js-deps
	$(GO) test -run='^$$' -bench=. -benchmem -timeout 60m ./...

## bench-yjs: the B4 trace side by side with JS yjs in one run (B4_REPEATS=5 alternating repeats, medians), the memory of 10,000 loaded
## documents of about 30 KB (in a process of their own), and remote applies on large documents
bench-yjs: js-deps
	NOMICORE_B4_REPORT=1 NOMICORE_B4_REPEATS=$(B4_REPEATS) $(GO) test -count=1 -timeout 60m -run TestB4Report -v ./yjs
	NOMICORE_B4_REPORT=1 $(GO) test -count=1 -timeout 30m -run TestLoadedDocsMemory -v ./yjs
	$(GO) test -run '^$$' -bench 'RemoteApplyLargeDoc' -benchmem ./yjs

## bench-replication: the replication workloads (fan-out 20 peers × 500 updates; 200 namespaces
## × 2 peers × 50 updates; bootstrap of a 400 KB document) on loopback with bbolt stores
bench-replication:
	$(GO) run ./cmd/benchrepl

## bench-relay: the relay harness of ../shared/bench/relay (copied to a temporary folder,
## npm ci there) runs fan-out and multidoc against the hub built from this tree (its
## replication endpoint, and its Hocuspocus endpoint with the harness's Hocuspocus client),
## Hocuspocus and the y-websocket server in one run, and prints the hub's ratios to them
## (scripts/benchrelay/bench.sh lists the knobs: REPEATS, SERVERS, RELAY_OVERLAY, QUIET_MAX)
bench-relay:
	./scripts/benchrelay/bench.sh

## bench-joinstorm: 150 editors (y-websocket providers under Node) join one 20 MiB document
## within one second, on a hub and on a peer built from this tree, and against Hocuspocus and
## the y-websocket server in the same run: time until all are synced, the server's peak RSS
## growth against 2 × the document's encoded size + 64 MiB, every editor's text checked
## (scripts/joinstorm/joinstorm.mjs; a few minutes, several GiB for the editors)
bench-joinstorm:
	./scripts/joinstorm/bench.sh

## bench-presence: editors' presence across nodes: 100 stock y-websocket editors on one
## document moving their cursors 5 times a second for 60 s, spread over a hub and two peers
## and then all on the hub, and spread over a hub cluster's three nodes and then all on one:
## latency p50/p99 on the same node and across nodes, the processes' CPU, the bytes of
## presence (NOMICORE_BENCH_PRESENCE_EDITORS, _RATE, _SECONDS resize it)
bench-presence: js-deps
	set -o pipefail; NOMICORE_BENCH_PRESENCE=1 $(GO) test -count=1 -timeout 30m -run 'TestBench_Presence(HubPeers|Cluster)' -v ./e2e/ | grep -E 'presence_bench|^(---|ok|FAIL)'

## bench-cluster: a hub cluster of three nodes against a single hub: write-to-ACK and
## write-to-durable latency, throughput, and the load time of a namespace; the fan-out with
## 20 peers on one node and spread over three (latency, hub CPU per delivery); the time
## until 200 peers are live again after their node is killed
bench-cluster:
	$(GO) run ./cmd/benchrepl -workload cluster,clusterfanout,failover

## bench-feed: the change feed and webhooks of the hub binary: 8 writers × 50 namespaces for
## 10 s through the admin API; an SSE reader's events per second and lag, the feed read again
## from cursor 0, a webhook endpoint's delivery latency p50/p99 (no debounce, then the
## default 2 s)
bench-feed:
	$(GO) run ./cmd/benchrepl -workload feed
	$(GO) run ./cmd/benchrepl -workload feed -feed-debounce 2s

## bench-large: the hub and peer binaries with documents of 1, 8 and 32 MiB: a fresh peer's
## time to go live, four fresh peers at once (time, peak memory), a 4 MiB write to three peers
bench-large: build
	$(GO) run ./cmd/benchrepl -workload large -bin $(BIN)

## bench-backup: a hub whose store holds BACKUP_STORE_MIB (1024 MiB) of documents, written to through its admin
## API while hub backup copies it (a few minutes, about 3 GiB of disk under $$TMPDIR): the
## store's and the backup's size, the backup's time, and the writes' latency without a backup
## and during it — the longest is the pause a backup causes
BACKUP_STORE_MIB ?= 1024
bench-backup: build
	$(GO) run ./cmd/benchrepl -workload backup -store-mib $(BACKUP_STORE_MIB) -bin $(BIN)

## bench-reconnect: reconnection under faults (about 20 minutes): hub outages of 5/15/30 s with
## 500 peers × 10 namespaces and 2,000 × 1 (reconnect-storm percentiles), a hub crash loop
## (20 crashes, up 3–5 s, down 0.5 s: the part of its up time peers are live), links cut every
## 5 s for 120 s; each with the default reconnect policy and with the contract's backoff
bench-reconnect:
	$(GO) run ./cmd/benchrepl -workload storm,crashloop,linkcut

## bench-slowlink: 6 MB toward a live peer over a 100 KB/s link with the shipped liveness
## timers (about a minute): the connection stays up; prints the time it took
bench-slowlink:
	NOMICORE_E2E_LONG=1 $(GO) test -count=1 -timeout 10m -run TestE2E_SlowLinkLong -v ./e2e/

## lint: gofmt check, go vet, staticcheck and govulncheck (both pinned as tools in go.mod,
## fetched from the module proxy on first use); see vulncheck
lint: vulncheck-db
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) tool govulncheck -db file://$(abspath $(VULNDB_DIR)) ./...

## vulncheck: govulncheck alone. Its database is built under VULNDB_DIR (bin/vulndb) from
## the golang.org/x/vulndb module, which the Go module proxy serves, at VULNDB_VERSION, so no
## access to vuln.go.dev is needed (internal/tools/vulndb says how). The version is pinned so
## that `make lint` gives the same answer for the same tree; `make vulncheck
## VULNDB_VERSION=latest` checks against everything the proxy knows now (do it before a
## release, then move the pin).
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULNDB_DIR     ?= $(BIN)/vulndb
vulncheck: vulncheck-db
	$(GO) tool govulncheck -db file://$(abspath $(VULNDB_DIR)) ./...

vulncheck-db:
	$(GO) run ./internal/tools/vulndb -version $(VULNDB_VERSION) -out $(VULNDB_DIR)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
