package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/smallfs"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// The operations docs/operations.md describes, run as an operator runs them: backups of a
// running hub and restore drills, a full disk, a damaged store, upgrades, the peers'
// durable count of local writes.

// bearer is an HTTP client that sends an admin token.
func bearer(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token}}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// adminTokenFile writes an admin token into a file of dir and returns both.
func adminTokenFile(t *testing.T, dir string) (string, string) {
	t.Helper()
	const token = "an-admin-token-for-the-test"
	f := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return token, f
}

// writeLoad writes keys into a namespace through processes, one writer each, until stop,
// and keeps the keys whose writes were acknowledged (204): what must never be lost.
type writeLoad struct {
	t    *testing.T
	ns   string
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	// acked holds the acknowledged keys, with the value written.
	acked map[string]any
	tried int
}

func startLoad(t *testing.T, ns string, procs ...*proc) *writeLoad {
	l := &writeLoad{t: t, ns: ns, stop: make(chan struct{}), acked: map[string]any{}}
	for _, p := range procs {
		l.wg.Add(1)
		go func(p *proc) {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := fmt.Sprintf("%s-%d", p.name, i)
				ok := setOnce(p, ns, key, float64(i))
				l.mu.Lock()
				l.tried++
				if ok {
					l.acked[key] = float64(i)
				}
				l.mu.Unlock()
				if !ok {
					time.Sleep(50 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}(p)
	}
	return l
}

// end stops the writers and returns the acknowledged keys.
func (l *writeLoad) end() map[string]any {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("write load on %s: %d writes acknowledged of %d tried", l.ns, len(l.acked), l.tried)
	if len(l.acked) == 0 {
		l.t.Fatal("no write of the load was acknowledged")
	}
	return l.acked
}

// hasAll waits until every process holds every key of want in the namespace's notes.
func hasAll(t *testing.T, ns string, want map[string]any, timeout time.Duration, procs ...*proc) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d acknowledged writes everywhere", len(want)), func() error {
		for _, p := range procs {
			n, status := p.api().notes(ns)
			if status != 200 {
				return fmt.Errorf("%s: doc status %d", p.name, status)
			}
			missing := 0
			var some string
			for k, v := range want {
				if fmt.Sprint(n[k]) != fmt.Sprint(v) {
					missing++
					some = k
				}
			}
			if missing > 0 {
				return fmt.Errorf("%s lacks %d acknowledged writes (%s, …)", p.name, missing, some)
			}
		}
		return nil
	})
}

// takeBackup runs hub backup against a hub and returns the file it wrote.
func takeBackup(t *testing.T, admin, tokenFile, out string) {
	t.Helper()
	b, err := exec.Command(bin.hub, "backup", "--admin", admin, "--admin-token-file", tokenFile, "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("hub backup: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "checked, written to "+out) {
		t.Fatalf("hub backup said: %s", b)
	}
}

// restore runs hub restore and returns its output.
func restore(t *testing.T, from, data string, extra ...string) string {
	t.Helper()
	b, err := exec.Command(bin.hub, append([]string{"restore", "--from", from, "--data", data}, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("hub restore: %v\n%s", err, b)
	}
	return string(b)
}

// TestE2E_RestoreDrill: the restore drill of docs/operations.md. A hub and two peers under
// write load; a backup taken while they write (hub backup, through the admin API, with its
// token); a namespace created after it; the hub lost (SIGKILL) while the peers keep
// writing; the backup restored into a new data directory and the hub started on it. The
// peers reconnect and every write they had acknowledged — before the backup, after it,
// while the hub was away — is on the restored hub and on both peers. The namespace created
// after the backup is reported — the peer's target failed NAMESPACE_NOT_FOUND saying the
// hub may have been restored, the hub's log naming the namespace and the way back — and
// re-created from the peer's replica, after which its writes are on the hub too. Restored
// again with --restore-fence, the hub fences the peers instead: their targets are
// conflicted, and after a reset they hold the backup's content, without what was written
// since.
func TestE2E_RestoreDrill(t *testing.T) {
	c := newCluster(t)
	token, tokenFile := adminTokenFile(t, c.dir)
	tokA := c.tokenFile("peer-a", c.token("peer-a"))
	tokB := c.tokenFile("peer-b", c.token("peer-b"))
	hub := c.startHub("--admin-token-file", tokenFile)
	hub.adminHTTP = bearer(token)
	ns := hub.api().createNamespace()
	hub.api().set(ns, map[string]any{"before": "the backup"})
	a := c.startPeer("peer-a", tokA, "--target", ns)
	b := c.startPeer("peer-b", tokB, "--target", ns)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")

	load := startLoad(t, ns, a, b)
	time.Sleep(time.Second)
	backupFile := filepath.Join(c.dir, "hub.backup")
	takeBackup(t, hub.admin, tokenFile, backupFile)
	if status, body := hub.api().do("GET", "/v1/backup", nil); status != 200 || len(body) < 100 {
		t.Fatalf("GET /v1/backup with the token: %d, %d bytes", status, len(body))
	}
	if status, _ := a.api().do("GET", "/v1/backup", nil); status != 404 {
		t.Fatalf("a peer's GET /v1/backup: %d", status)
	}

	// A namespace created after the backup, written through peer-a.
	ns2 := hub.api().createNamespace()
	a.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns2+`","owner":"default"}`), 201, nil)
	targetState(t, a, ns2, "live")
	late := map[string]any{}
	for i := range 5 {
		k := fmt.Sprintf("late-%d", i)
		if !setOnce(a, ns2, k, float64(i)) {
			t.Fatalf("write %s to the new namespace was not acknowledged", k)
		}
		late[k] = float64(i)
	}
	hasAll(t, ns2, late, 30*time.Second, hub)
	time.Sleep(500 * time.Millisecond)

	// The hub is lost; the peers keep writing; it comes back from the backup.
	hub.kill()
	time.Sleep(time.Second)
	restored := filepath.Join(c.dir, "restored")
	out := restore(t, backupFile, restored)
	if !strings.Contains(out, "1 namespaces") { // the one created after the backup is not in it
		t.Fatalf("hub restore said: %s", out)
	}
	c.startHub("--admin-token-file", tokenFile, "--data", restored)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	time.Sleep(time.Second)
	acked := load.end()
	acked["before"] = "the backup"
	hasAll(t, ns, acked, 60*time.Second, hub, a, b)
	sameState(t, ns, 30*time.Second, hub, a, b)

	// The namespace created after the backup: reported, then re-created from the replica.
	targetFailed(t, a, ns2, "NAMESPACE_NOT_FOUND")
	if reason, _ := a.api().target(ns2)["reason"].(string); !strings.Contains(reason, "restored") || !strings.Contains(reason, "/recreate") {
		t.Fatalf("peer-a's reason for the missing namespace: %q", reason)
	}
	eventually(t, 20*time.Second, "the hub's report of the missing namespace", func() error {
		log, _ := os.ReadFile(hub.log)
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, ns2) && strings.Contains(line, "restored from a backup taken before the namespace was created") &&
				strings.Contains(line, "/v1/namespaces/"+ns2+"/recreate") {
				return nil
			}
		}
		return fmt.Errorf("no such line in the hub's log")
	})
	status, state := a.api().do("GET", "/v1/namespaces/"+ns2+"/update", nil)
	if status != 200 {
		t.Fatalf("peer-a's replica of %s: %d", ns2, status)
	}
	var created map[string]any
	hub.api().json("POST", "/v1/namespaces/"+ns2+"/recreate?owner=default", state, 201, &created)
	targetState(t, a, ns2, "live")
	hasAll(t, ns2, late, 30*time.Second, hub, a)
	if status, _ := hub.api().do("POST", "/v1/namespaces/"+ns2+"/recreate?owner=default", state); status != 409 {
		t.Fatalf("re-creating it twice: %d", status)
	}

	// The same backup restored with --restore-fence: the peers are fenced, and a reset
	// gives them the backup's content.
	a.api().set(ns, map[string]any{"after": "the restore"})
	hasAll(t, ns, map[string]any{"after": "the restore"}, 30*time.Second, hub)
	hub.stop()
	fenced := filepath.Join(c.dir, "fenced")
	if out := restore(t, backupFile, fenced, "--restore-fence"); !strings.Contains(out, "fenced") {
		t.Fatalf("hub restore --restore-fence said: %s", out)
	}
	c.startHub("--admin-token-file", tokenFile, "--data", fenced)
	targetState(t, a, ns, "conflicted")
	targetState(t, b, ns, "conflicted")
	if status, body := a.api().do("POST", "/v1/namespaces/"+ns+"/update", mapUpdateOn(t, a, ns, "x", 1.0)); status != 409 ||
		!strings.Contains(string(body), "REPLICA_CONFLICTED") {
		t.Fatalf("a write to a fenced replica: %d %s", status, body)
	}
	for _, p := range []*proc{a, b} {
		p.api().json("POST", "/v1/targets/"+ns+"/reset", nil, 200, nil)
		targetState(t, p, ns, "live")
	}
	sameState(t, ns, 30*time.Second, hub, a, b)
	n, _ := a.api().notes(ns)
	if n["before"] != "the backup" || n["after"] != nil {
		t.Fatalf("after the fenced restore and a reset: before=%v after=%v", n["before"], n["after"])
	}
	var info struct{ ReplicationEpoch uint64 }
	hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &info)
	if info.ReplicationEpoch != 2 {
		t.Fatalf("the fenced namespace's epoch: %d", info.ReplicationEpoch)
	}
}

// TestE2E_DiskFull: a hub whose data directory is on a small filesystem that fills up (a
// tmpfs made by the test). Writes a peer sends then fail to commit: the hub turns degraded
// — /readyz 503 saying the disk is full, one log line saying what to free, its own admin
// writes refused with 503 PERSISTENCE_DEGRADED, the peer's further updates refused (its
// target failed, retried by itself, its local writes still taken) — and keeps serving
// reads. Once space is given back it recovers by itself, within seconds, without a
// restart: ready, the peer's writes flow in, admin writes work; and nothing acknowledged is
// lost, as a restart of the hub shows.
func TestE2E_DiskFull(t *testing.T) {
	fs := smallfs.Mount(t, 48<<20)
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	data := filepath.Join(fs, "hub")
	tokens := []string{"--data", data, "--tokens", filepath.Join(c.hubData(), "tokens.json")}
	hub := c.startHub(tokens...)
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"before": "full"})
	hasAll(t, ns, map[string]any{"before": "full"}, 30*time.Second, hub)

	filler := smallfs.Fill(t, fs)
	big := strings.Repeat("x", 256<<10)
	acked := map[string]any{"before": "full"}
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("the hub never turned degraded on a full disk")
		}
		k := fmt.Sprintf("big-%d", i)
		if setOnce(a, ns, k, big) { // a peer takes local writes whatever the hub does
			acked[k] = big
		}
		if status, _ := readyz(hub); status == 503 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	status, body := readyz(hub)
	t.Logf("the hub on a full disk after %d large writes: /readyz %d %s", len(acked)-1, status, body)
	if status != 503 || !strings.Contains(body, `"persistence":"degraded"`) || !strings.Contains(body, "the disk holding "+data+" is full") {
		t.Fatalf("hub readyz on a full disk: %d %s", status, body)
	}
	eventually(t, 10*time.Second, "the log line saying what to free", func() error {
		log, _ := os.ReadFile(hub.log)
		if !strings.Contains(string(log), "the disk holding the data directory is full") || !strings.Contains(string(log), "Free space on that filesystem") {
			return fmt.Errorf("not in the hub's log")
		}
		return nil
	})
	if status, b := hub.api().do("POST", "/v1/namespaces/"+ns+"/update", mapUpdateOn(t, hub, ns, "refused", true)); status != 503 ||
		!strings.Contains(string(b), "PERSISTENCE_DEGRADED") {
		t.Fatalf("an admin write on a full disk: %d %s", status, b)
	}
	if _, status := hub.api().notes(ns); status != 200 {
		t.Fatalf("a read on a full disk: %d", status)
	}
	for i := range 3 {
		k := fmt.Sprintf("meanwhile-%d", i)
		if !setOnce(a, ns, k, float64(i)) {
			t.Fatalf("peer-a refused a local write while the hub's disk is full")
		}
		acked[k] = float64(i)
	}
	eventually(t, 30*time.Second, "peer-a's target failed with PERSISTENCE_DEGRADED", func() error {
		tg := a.api().target(ns)
		if tg["code"] != "PERSISTENCE_DEGRADED" {
			return fmt.Errorf("target %v", tg)
		}
		return nil
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the hub ready again by itself", func() error {
		if status, body := readyz(hub); status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	targetState(t, a, ns, "live")
	hasAll(t, ns, acked, 60*time.Second, hub, a)
	hub.api().set(ns, map[string]any{"after": "space"})
	acked["after"] = "space"
	hub.stop()
	c.startHub(tokens...)
	hasAll(t, ns, acked, 30*time.Second, hub)
}

// runToExit runs a binary that should refuse to start, and returns its exit status and
// output.
func runToExit(t *testing.T, exe string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %s did not exit:\n%s", exe, strings.Join(args, " "), out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestE2E_DamagedStore: stores damaged while the node was stopped. A hub whose store file
// was cut short refuses to start, naming the file and the way out (restore a backup), and
// nmcr store check reports the damage; with its store back it starts. A peer whose store
// has a record that no longer matches its checksum refuses to start, naming the file and
// --rebuild-damaged-store; with that flag it moves the file aside (kept), reads its target
// back from it, bootstraps again from the hub and is live with the hub's content. A store
// of a newer format than this version reads is refused by both as such — not as damage:
// the peer's rebuild leaves it alone.
func TestE2E_DamagedStore(t *testing.T) {
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub()
	ns := hub.api().createNamespace()
	hub.api().set(ns, map[string]any{"from": "hub"})
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"peer": "peer-marker-41aa5c"})
	converged(t, ns, map[string]any{"from": "hub", "peer": "peer-marker-41aa5c"}, hub, a)
	a.stop()
	hub.stop()
	hubFile := filepath.Join(c.hubData(), persistence.FileName)
	peerData := filepath.Join(c.dir, "peer-a")
	peerFile := filepath.Join(peerData, persistence.FileName)
	pristine, err := os.ReadFile(hubFile)
	if err != nil {
		t.Fatal(err)
	}
	hubArgs := []string{"serve", "--data", c.hubData(), "--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--client-listen", "off"}

	// The hub's store, cut short.
	if err := persistencetest.Truncate(hubFile, 3*persistencetest.PageSize); err != nil {
		t.Fatal(err)
	}
	code, out := runToExit(t, bin.hub, hubArgs...)
	if code != 1 || !strings.Contains(out, "the store file "+hubFile+" is damaged") || !strings.Contains(out, "hub restore --from BACKUP") {
		t.Fatalf("the hub on a store cut short: exit %d\n%s", code, out)
	}
	code, out = runToExit(t, bin.nmcr, "store", "check", c.hubData())
	if code != 1 || !strings.Contains(out, hubFile+": DAMAGED") {
		t.Fatalf("nmcr store check on it: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(hubFile, pristine, 0o600); err != nil {
		t.Fatal(err)
	}
	c.startHub()

	// The peer's store: a record that no longer matches its checksum.
	if err := persistencetest.FlipIn(peerFile, []byte("peer-marker-41aa5c")); err != nil {
		t.Fatal(err)
	}
	peerArgs := []string{"run", "--instance-id", "peer-a", "--hub-url", "ws://" + c.hubRepl + "/v1/replication", "--token-file", tok,
		"--data", peerData, "--admin-listen", freeAddr(t), "--client-listen", "off"}
	code, out = runToExit(t, bin.peer, peerArgs...)
	if code != 1 || !strings.Contains(out, "the store file "+peerFile+" is damaged at docs/default/"+ns+"/log/") ||
		!strings.Contains(out, "--rebuild-damaged-store") {
		t.Fatalf("the peer on a damaged record: exit %d\n%s", code, out)
	}
	code, out = runToExit(t, bin.nmcr, "store", "check", peerData)
	if code != 1 || !strings.Contains(out, "DAMAGED at docs/default/"+ns+"/log/") || !strings.Contains(out, "a peer's store: start the peer with --rebuild-damaged-store") {
		t.Fatalf("nmcr store check on the peer's store: exit %d\n%s", code, out)
	}
	a.args = nil
	c.startPeer("peer-a", tok, "--rebuild-damaged-store") // no --target: it is read back from the damaged store
	targetState(t, a, ns, "live")
	converged(t, ns, map[string]any{"from": "hub", "peer": "peer-marker-41aa5c"}, hub, a)
	moved, _ := filepath.Glob(peerFile + ".damaged-*")
	if len(moved) != 1 {
		t.Fatalf("the damaged store was not kept: %v", moved)
	}
	if log, _ := os.ReadFile(a.log); !strings.Contains(string(log), "the store was damaged: it was moved aside") {
		t.Fatal("the peer did not log the rebuild")
	}
	a.stop()
	hub.stop()

	// A store of a newer format: refused as such, and left alone.
	if err := persistencetest.SetFormat(hubFile, persistence.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	code, out = runToExit(t, bin.hub, hubArgs...)
	if code != 1 || !strings.Contains(out, "newer version of Nomicore") || strings.Contains(out, "damaged") {
		t.Fatalf("the hub on a store of a newer format: exit %d\n%s", code, out)
	}
	if err := persistencetest.SetFormat(peerFile, persistence.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	code, out = runToExit(t, bin.peer, append(peerArgs, "--rebuild-damaged-store")...)
	if code != 1 || !strings.Contains(out, "newer version of Nomicore") {
		t.Fatalf("the peer on a store of a newer format: exit %d\n%s", code, out)
	}
	if moved, _ := filepath.Glob(peerFile + ".damaged-*"); len(moved) != 1 {
		t.Fatalf("a store of a newer format was moved aside: %v", moved)
	}
	if err := persistencetest.SetFormat(hubFile, persistence.FormatVersion); err != nil {
		t.Fatal(err)
	}
	c.startHub()
	hasAll(t, ns, map[string]any{"from": "hub", "peer": "peer-marker-41aa5c"}, 10*time.Second, hub)
}

// TestE2E_LedgerSurvivesRestarts: a peer's count of local writes the hub does not hold yet
// survives a kill -9 right after the last write was acknowledged — through the admin API
// and by an editor (a Hocuspocus provider told its change is saved) — and an orderly
// restart: the restarted peer is not ready, and /v1/targets and the metric count the bytes
// — until the hub is back and has them.
func TestE2E_LedgerSurvivesRestarts(t *testing.T) {
	hp := startHocusAgent(t, "v4")
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	editorTok := c.clientToken("peer-a", "editor")
	hub := c.startHub()
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")
	hub.stop()
	const admin, edited = 300 << 10, 60 << 10
	const n = admin + edited
	writeText(t, a, ns, admin, 100<<10, 'w') // three writes, each acknowledged (204)
	hp.must("open", map[string]any{"name": "editor", "url": hocusURL(a), "ns": ns, "token": editorTok, "timeoutMs": 30000}, nil)
	hp.must("insert", map[string]any{"name": "editor", "text": strings.Repeat("e", edited)}, nil)
	hp.waitSaved("editor")
	a.kill()
	// The provider would resend its change to the restarted peer: it leaves first, so that
	// only what the peer kept counts.
	hp.must("close", map[string]any{"name": "editor"}, nil)

	unreplicated := func(what string) {
		t.Helper()
		tg := a.api().target(ns)
		if b, _ := tg["unreplicatedBytes"].(float64); b < n {
			t.Fatalf("%s: unreplicatedBytes %v, want at least %d: %v", what, tg["unreplicatedBytes"], n, tg)
		}
		if got := a.api().metric(`nomicore_local_writes_unreplicated_bytes{side="peer"}`); got < n {
			t.Fatalf("%s: nomicore_local_writes_unreplicated_bytes = %v", what, got)
		}
		status, body := readyz(a)
		if status != 503 || !strings.Contains(body, "bytes of local writes to 1 namespace(s) not replicated") {
			t.Fatalf("%s: readyz %d %s", what, status, body)
		}
		t.Logf("%s: unreplicatedBytes %v; readyz %d %s", what, tg["unreplicatedBytes"], status, strings.TrimSpace(body))
	}
	c.startPeer("peer-a", tok)
	unreplicated("after kill -9")
	a.stop()
	c.startPeer("peer-a", tok)
	unreplicated("after an orderly restart")

	c.startHub()
	targetState(t, a, ns, "live")
	eventually(t, 30*time.Second, "the hub holds the writes", func() error {
		if tg := a.api().target(ns); tg["unreplicatedBytes"] != nil {
			return fmt.Errorf("target %v", tg)
		}
		if status, body := readyz(a); status != 200 {
			return fmt.Errorf("readyz %d %s", status, body)
		}
		return nil
	})
	if got := textLen(t, hub, ns); got != n {
		t.Fatalf("the hub's text: %d bytes, want %d", got, n)
	}
	a.stop()
	c.startPeer("peer-a", tok)
	if status, body := readyz(a); status != 200 && strings.Contains(body, "local writes") {
		t.Fatalf("after a restart with nothing unreplicated: %d %s", status, body)
	}
}

// TestE2E_Cluster_BackupRestore: a backup of a hub cluster taken from one node (hub backup;
// one namespace written past a compaction, so its log starts at a snapshot, and a small one),
// restored (hub restore) into the data directory of one node of a new cluster: that node
// loads it once the new cluster has quorum and is not ready until then; afterwards every
// node of the new cluster serves both namespaces with every write, and takes new ones.
func TestE2E_Cluster_BackupRestore(t *testing.T) {
	t.Parallel()
	token, tokenFile := adminTokenFile(t, t.TempDir())
	old := newHubCluster(t, 3, "--admin-token-file", tokenFile)
	for _, p := range old.hubs {
		p.adminHTTP = bearer(token)
	}
	ns := old.hubs[0].api().createNamespace()
	small := old.hubs[1].api().createNamespace()
	old.hubs[2].api().set(small, map[string]any{"small": "namespace"})
	want := map[string]any{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 3 { // a few more than the 1,000 records after which a log is compacted
		wg.Add(1)
		go func(p *proc) {
			defer wg.Done()
			for i := range 350 {
				k := fmt.Sprintf("%s-%d", p.name, i)
				if setOnce(p, ns, k, float64(i)) {
					mu.Lock()
					want[k] = float64(i)
					mu.Unlock()
				}
			}
		}(old.hubs[w])
	}
	wg.Wait()
	if len(want) < 1000 {
		t.Fatalf("only %d writes acknowledged", len(want))
	}
	hasAll(t, ns, want, 30*time.Second, old.hubs...)
	eventually(t, 30*time.Second, "the namespace's log compacted into a snapshot", func() error {
		for _, p := range old.hubs {
			if log, _ := os.ReadFile(p.log); strings.Contains(string(log), "namespace log compacted") {
				return nil
			}
		}
		return fmt.Errorf("no node compacted it")
	})
	backupFile := filepath.Join(t.TempDir(), "cluster.backup")
	takeBackup(t, old.hubs[1].admin, tokenFile, backupFile)

	restoreOut := ""
	fresh := startHubCluster(&hubCluster{t: t, dir: t.TempDir(), peers: map[string]*proc{}, extra: []string{"--admin-token-file", tokenFile},
		prepare: func(c *hubCluster) {
			restoreOut = restore(t, backupFile, c.data(0))
			for _, p := range c.hubs {
				p.adminHTTP = bearer(token)
			}
		}}, 3)
	if !strings.Contains(restoreOut, "2 namespaces") || !strings.Contains(restoreOut, "a new cluster") {
		t.Fatalf("hub restore of a cluster's backup said: %s", restoreOut)
	}
	hasAll(t, ns, want, 60*time.Second, fresh.hubs...)
	hasAll(t, small, map[string]any{"small": "namespace"}, 30*time.Second, fresh.hubs...)
	fresh.hubs[2].api().set(ns, map[string]any{"in the new": "cluster"})
	hasAll(t, ns, map[string]any{"in the new": "cluster"}, 30*time.Second, fresh.hubs...)
	if log, _ := os.ReadFile(fresh.hubs[0].log); !strings.Contains(string(log), "the backup is loaded into the cluster") {
		t.Fatal("node n1 did not log the load")
	}
	if _, err := os.Stat(filepath.Join(fresh.data(0), node.ClusterRestoreFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the loaded backup is still pending: %v", err)
	}
}
