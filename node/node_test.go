package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func parse(t *testing.T, args []string, env map[string]string) (*Common, int, bool) {
	t.Helper()
	f := cli.NewFlags("test", "test [flags]", "")
	c := RegisterCommon(f)
	operands, code, ok := f.Parse(args, cli.IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }})
	if ok && len(operands) > 0 {
		return c, 2, false // the serving commands take no operands
	}
	return c, code, ok
}

func TestFlagsFromEnvironmentAndCommandLine(t *testing.T) {
	c, _, ok := parse(t, []string{"--max-update-bytes", "100000"}, map[string]string{
		"NOMICORE_MAX_UPDATE_BYTES": "200000", "NOMICORE_ACK_TIMEOUT": "5s", "NOMICORE_LOG_LEVEL": "debug"})
	if !ok {
		t.Fatal("parse failed")
	}
	if c.Protocol.MaxUpdateBytes != 100000 || c.Protocol.AckTimeout != 5*time.Second || c.LogLevel != "debug" {
		t.Fatalf("command line must win over the environment, which sets the rest: %+v", c)
	}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.Protocol.Generation != protocol.GenerationV2 {
		t.Fatalf("default generation %v", c.Protocol.Generation)
	}
	if !c.Procs.Auto {
		t.Fatalf("default --procs %v, want auto", c.Procs)
	}
	// The shipped chunked caps, not given, follow the lowered --max-update-bytes down.
	if want := 64 * 100000; c.Protocol.MaxChunkedBootstrapBytes != want || c.Protocol.MaxChunkedSyncDiffBytes != want || c.Protocol.MaxChunkedUpdateBytes != 4<<20 {
		t.Fatalf("chunked caps %d %d %d", c.Protocol.MaxChunkedBootstrapBytes, c.Protocol.MaxChunkedSyncDiffBytes, c.Protocol.MaxChunkedUpdateBytes)
	}
	if _, code, ok := parse(t, []string{"--max-update-bytes", "x"}, nil); ok || code != 2 {
		t.Fatalf("a bad value: ok=%v code=%d", ok, code)
	}
	if _, code, ok := parse(t, nil, map[string]string{"NOMICORE_PING_INTERVAL": "soon"}); ok || code != 2 {
		t.Fatalf("a bad environment value: ok=%v code=%d", ok, code)
	}
	if _, code, ok := parse(t, []string{"stray"}, nil); ok || code != 2 {
		t.Fatalf("a stray argument: ok=%v code=%d", ok, code)
	}
}

// Every start-up constraint of the limits and timeouts refused at start, in one line that
// names it in flag names.
func TestS17_BadConfigurationIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-update-bytes", "600000"}, "--max-update-bytes <= --max-frame-bytes - --protocol-overhead-bytes does not hold (600000 > 525312 - 1024)"},
		{[]string{"--max-queued-update-bytes", "1000"}, "--max-queued-update-bytes >= --max-update-bytes does not hold"},
		{[]string{"--max-in-flight-updates", "0"}, "--max-in-flight-updates >= 1 does not hold"},
		{[]string{"--ack-timeout", "1500us"}, "--ack-timeout > 0 does not hold (--ack-timeout = 1.5ms (must be a positive whole number of milliseconds))"},
		{[]string{"--low-water-bytes", "2000000"}, "--low-water-bytes < --high-water-bytes does not hold"},
		{[]string{"--pong-timeout", "1m"}, "--pong-timeout < --ping-interval does not hold"},
		{[]string{"--generation", "v3"}, "--generation"},
		// A chunked cap given explicitly is checked as given (it follows nothing down).
		{[]string{"--max-update-bytes", "100000", "--max-chunked-bootstrap-bytes", "33554432"},
			"--max-chunked-bootstrap-bytes <= --max-chunks-per-update * --max-update-bytes does not hold (33554432 > 64 * 100000)"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--procs", "0"}, "--procs \"0\": want auto, all, or a number of processors"},
	} {
		c, _, ok := parse(t, tc.args, nil)
		if !ok {
			t.Fatalf("%v: parse failed", tc.args)
		}
		err := c.Resolve()
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Ms ") {
			t.Errorf("%v: %q is not one line naming %q", tc.args, err, tc.want)
		}
	}
}

// TestShippedDefaults: the binaries run the v2 generation with a 32 MiB document cap (64
// chunks of 512 KiB, inside the chains of docs/protocol.md#backpressure) and 4 MiB live
// updates; --generation v1 and the environment still select the older behaviour and other
// caps.
func TestShippedDefaults(t *testing.T) {
	c, _, _ := parse(t, nil, nil)
	must(t, c.Resolve())
	p := c.Protocol
	if p.Generation != protocol.GenerationV2 || p.MaxChunkedBootstrapBytes != 32<<20 || p.MaxChunkedSyncDiffBytes != 32<<20 ||
		p.MaxChunkedUpdateBytes != 4<<20 || p.MaxQueuedUpdateBytes != 4<<20 || p.MaxUpdateBytes != 512<<10 || p.MaxChunksPerUpdate != 64 {
		t.Fatalf("shipped %+v", p)
	}
	if d := protocol.DefaultConfig(); d.MaxChunkedBootstrapBytes != 4<<20 {
		t.Fatalf("the library default changed: %d", d.MaxChunkedBootstrapBytes)
	}
	c, _, _ = parse(t, []string{"--generation", "v1"}, map[string]string{"NOMICORE_MAX_CHUNKED_SYNC_DIFF_BYTES": "1048576"})
	must(t, c.Resolve())
	if c.Protocol.Generation != protocol.GenerationV1 || c.Protocol.Capabilities() != 0 || c.Protocol.MaxChunkedSyncDiffBytes != 1<<20 {
		t.Fatalf("v1: %+v", c.Protocol)
	}
	// Raised for documents beyond 32 MiB.
	c, _, _ = parse(t, []string{"--max-chunks-per-update", "256", "--max-chunked-bootstrap-bytes", "134217728",
		"--max-chunked-sync-diff-bytes", "134217728"}, nil)
	must(t, c.Resolve())
}

func TestAdminTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "admin")
	os.WriteFile(p, []byte("  tok\n"), 0o600)
	c, _, _ := parse(t, []string{"--admin-token-file", p}, nil)
	if err := c.Resolve(); err != nil || c.AdminToken != "tok" {
		t.Fatalf("%q %v", c.AdminToken, err)
	}
	c, _, _ = parse(t, []string{"--admin-token-file", p + "-missing"}, nil)
	if err := c.Resolve(); err == nil {
		t.Fatal("a missing admin token file was accepted")
	}
}

func TestCheckAdmin(t *testing.T) {
	for addr, loop := range map[string]bool{"127.0.0.1:8788": true, "[::1]:8788": true, "localhost:1": true,
		":8788": false, "0.0.0.0:8788": false, "10.1.2.3:80": false} {
		if IsLoopback(addr) != loop {
			t.Errorf("IsLoopback(%q) = %v", addr, !loop)
		}
		err := CheckAdmin(addr, "")
		if (err == nil) != loop {
			t.Errorf("CheckAdmin(%q, no token) = %v", addr, err)
		}
		if err := CheckAdmin(addr, "t"); err != nil {
			t.Errorf("CheckAdmin(%q, token) = %v", addr, err)
		}
	}
	if CheckAdmin("nonsense", "t") == nil {
		t.Error("a malformed address was accepted")
	}
}

func TestStringList(t *testing.T) {
	var s StringList
	s.Set("a, b")
	s.Set("c")
	if s.String() != "a,b,c" {
		t.Fatal(s)
	}
}

func TestOpenStoreInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	log := slog.New(slog.DiscardHandler)
	st, err := OpenStore(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v %v", info, err)
	}
	_, err = OpenStore(dir, log)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second open: %v", err)
	}
	if _, err := OpenStore("", log); err == nil {
		t.Fatal("an empty data dir was accepted")
	}
}

// OpenInstance holds the store until Close: a second open is refused, and Close frees it.
func TestOpenInstanceCloseReleasesTheStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	log := slog.New(slog.DiscardHandler)
	in, err := OpenInstance(dir, registry.RolePeer, observer.SidePeer, clock.Real(), log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenInstance(dir, registry.RolePeer, observer.SidePeer, clock.Real(), log); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second open: %v", err)
	}
	in.Close()
	in, err = OpenInstance(dir, registry.RolePeer, observer.SidePeer, clock.Real(), log)
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	in.Close()
}

func TestParseTarget(t *testing.T) {
	const ns = "ns-0123456789abcdef0123456789abcdef"
	if tg, err := ParseTarget(ns, "default"); err != nil || tg.Owner != "default" || tg.NamespaceID != ns {
		t.Fatal(tg, err)
	}
	if tg, err := ParseTarget(ns+":team:x", "default"); err != nil || tg.Owner != "team:x" {
		t.Fatal(tg, err)
	}
	if _, err := ParseTarget("ns-12", "default"); err == nil {
		t.Fatal("a bad id was accepted")
	}
}

func newPeerRegistry(t *testing.T) (persistence.Store, *registry.Registry) {
	t.Helper()
	st, err := persistence.NewMemoryStore(persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Role: registry.RolePeer, Catalog: st, Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(context.Background()); st.Close(context.Background()) })
	return st, reg
}

// docs/protocol.md#restart-and-shutdown: the targets a peer was given survive a restart (the
// host configuration restores them).
func TestS21_PersistentTargets(t *testing.T) {
	st, reg := newPeerRegistry(t)
	ctx := context.Background()
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	p := &PersistentTargets{TC: tc, Store: st}
	a := namespace.Target{NamespaceID: "ns-0123456789abcdef0123456789abcdef", Owner: "default"}
	b := namespace.Target{NamespaceID: "ns-fedcba9876543210fedcba9876543210", Owner: "team"}
	for _, tg := range []namespace.Target{a, b} {
		if created, err := p.AddTarget(ctx, tg); err != nil || !created {
			t.Fatalf("add %v: %v %v", tg, created, err)
		}
	}
	if created, err := p.AddTarget(ctx, a); err != nil || created {
		t.Fatalf("adding again: %v %v", created, err)
	}
	if _, err := p.AddTarget(ctx, namespace.Target{NamespaceID: a.NamespaceID, Owner: "other"}); err != namespace.ErrTargetConflict {
		t.Fatalf("another owner: %v", err)
	}
	if err := p.RemoveTarget(ctx, b.NamespaceID); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveTarget(ctx, b.NamespaceID); err != namespace.ErrUnknownTarget {
		t.Fatalf("removing twice: %v", err)
	}
	got, err := LoadTargets(ctx, st)
	if err != nil || len(got) != 1 || got[0] != a {
		t.Fatalf("remembered %v %v", got, err)
	}
	if len(p.Targets()) != 1 {
		t.Fatalf("targets %v", p.Targets())
	}
}

// deleteFails is a store whose DeleteConfig fails.
type deleteFails struct {
	persistence.Catalog
	err error
}

func (d deleteFails) DeleteConfig(context.Context, string) error { return d.err }

// A target the controller refuses is not left remembered in the store; when forgetting it
// fails, the caller hears of that too, since the next start would find it.
func TestPersistentTargets_RefusedTargetIsForgotten(t *testing.T) {
	st, reg := newPeerRegistry(t)
	ctx := context.Background()
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	refused := namespace.Target{NamespaceID: "ns-1", Owner: "default"}

	p := &PersistentTargets{TC: tc, Store: st}
	if _, err := p.AddTarget(ctx, refused); err == nil {
		t.Fatal("the controller took a malformed namespace id")
	}
	if ts, err := LoadTargets(ctx, st); err != nil || len(ts) != 0 {
		t.Fatalf("remembered after the refusal: %v %v", ts, err)
	}

	diskFull := errors.New("disk full")
	p = &PersistentTargets{TC: tc, Store: deleteFails{st, diskFull}}
	_, err = p.AddTarget(ctx, refused)
	if !errors.Is(err, diskFull) || !strings.Contains(err.Error(), "next start") {
		t.Fatalf("a failed rollback went unreported: %v", err)
	}
}

func TestObservabilityMetricsLintAndNames(t *testing.T) {
	st, reg := newPeerRegistry(t)
	o, err := NewObservability(slog.New(slog.DiscardHandler), observer.SidePeer)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.RegisterStore(st, reg); err != nil {
		t.Fatal(err)
	}
	// Every event type once, so every series exists.
	for _, s := range observertest.Samples() {
		o.Observer.Observe(s.Full)
	}
	o.TokenReload("changed")
	mfs, err := o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	allowed := map[string]bool{"side": true, "type": true, "code": true, "cause": true, "reason": true, "apply_effect": true}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "nomicore_") {
			t.Errorf("metric %s lacks the nomicore_ prefix", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetName()] {
					t.Errorf("metric %s has label %s outside the labels docs/protocol.md#adapters allows", mf.GetName(), l.GetName())
				}
			}
		}
	}
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, series := range []string{"nomicore_events_total{", "nomicore_store_healthy{side=\"peer\"} 1", "nomicore_token_reloads_total{",
		`nomicore_snapshot_save_failures_total{reason="permanent",side="peer"} 0`} {
		if !strings.Contains(rec.Body.String(), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

func TestRunFlushWritesSummaries(t *testing.T) {
	var buf bytes.Buffer
	o, err := NewObservability(slog.New(slog.NewJSONHandler(&syncWriter{w: &buf}, nil)), observer.SideHub)
	if err != nil {
		t.Fatal(err)
	}
	o.Observer.Observe(observer.Event{Side: observer.SideHub, Payload: observer.UpdateSent{NamespaceID: observertest.SampleNamespaceID, Bytes: 7, Sequence: 1}})
	stop := Go(func(ctx context.Context) { o.RunFlush(ctx, clock.NewFake(time.Unix(0, 0)), time.Hour) })
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"msg":"frame-summary"`) {
		t.Fatalf("no summary at stop: %s", buf.String())
	}
}

type syncWriter struct{ w io.Writer }

func (s *syncWriter) Write(b []byte) (int, error) { return s.w.Write(b) }

// The `write` command posts an update through a hub's admin API.
func TestWriteCommand(t *testing.T) {
	st, err := persistence.NewMemoryStore(persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { reg.Close(context.Background()); st.Close(context.Background()) }()
	api, err := adminapi.New(adminapi.Options{Side: observer.SideHub, Registry: reg, Store: st, Token: "tk"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	c, err := reg.Create(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "NOMICORE_ADMIN_TOKEN" {
			return "tk"
		}
		return ""
	}
	write := func(getenv func(string) string, stdout, stderr io.Writer, args ...string) int {
		return WriteCommand("hub", srv.URL).Run(args, cli.IO{Stdout: stdout, Stderr: stderr, Getenv: getenv})
	}
	code := write(env, &out, &errOut, "--namespace", c.NamespaceID, "--map", "cfg", "name=demo", "n=3", `list=[1,"x"]`)
	if code != 0 {
		t.Fatalf("write: %d %s", code, errOut.String())
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/namespaces/"+c.NamespaceID+"/doc?root=cfg:map", nil)
	req.Header.Set("Authorization", "Bearer tk")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	b, _ := json.Marshal(doc["cfg"])
	if string(b) != `{"list":[1,"x"],"n":3,"name":"demo"}` {
		t.Fatalf("doc %s", b)
	}
	if code := write(func(string) string { return "" }, &out, &errOut, "--namespace", c.NamespaceID, "k=v"); code != 1 ||
		!strings.Contains(errOut.String(), "401 UNAUTHORIZED") {
		t.Fatalf("without the token: %d %s", code, errOut.String())
	}
	// Usage errors say what is wrong, in one line.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", "ns-1", "k=v"}, `hub write: --namespace "ns-1" is not a namespace id (want ns- and 32 lowercase hex digits); see "hub write -h"`},
		{[]string{"k=v"}, `hub write: --namespace is required; see "hub write -h"`},
		{[]string{"--namespace", c.NamespaceID}, "nothing to write: give one or more KEY=VALUE"},
		{[]string{"--namespace", c.NamespaceID, "novalue"}, `"novalue" is not KEY=VALUE`},
	} {
		var stderr bytes.Buffer
		if code := write(env, io.Discard, &stderr, tc.args...); code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: %d %q, want one line naming %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// must fails the test at once when err is not nil.
var must = testkit.Must
