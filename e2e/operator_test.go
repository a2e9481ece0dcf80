package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// logLines returns a process's JSON log lines (the harness's own lines skipped).
func logLines(t *testing.T, p *proc) []map[string]any {
	t.Helper()
	f, err := os.Open(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// findLine returns the first log line whose fields include want.
func findLine(lines []map[string]any, want map[string]any) map[string]any {
next:
	for _, l := range lines {
		for k, v := range want {
			if fmt.Sprint(l[k]) != fmt.Sprint(v) {
				continue next
			}
		}
		return l
	}
	return nil
}

// A misconfigured peer says what is wrong and what to do, in /readyz, GET /v1/targets and
// one ERROR line: a wrong hub path, another peer's token; a target the hub does not have
// shows failed with its code.
func TestE2E_PeerSaysWhatIsWrong(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	tokA := c.tokenFile("peer-a", c.token("peer-a"))
	const missing = "ns-0123456789abcdef0123456789abcdef"

	wrongPath := c.startPeer("peer-a", tokA, "--hub-url", "ws://"+c.hubRepl+"/replication", "--target", ns)
	otherToken := c.startPeer("peer-b", tokA, "--target", ns) // peer-a's token
	unknownNS := c.startPeer("peer-c", c.tokenFile("peer-c", c.token("peer-c")), "--target", ns, "--target", missing)

	for _, tc := range []struct {
		p    *proc
		want []string
	}{
		{wrongPath, []string{"blocked", "HTTP 404", "/v1/replication"}},
		{otherToken, []string{"blocked", "INSTANCE_IDENTITY_MISMATCH", "made for another peer"}},
	} {
		eventually(t, 15*time.Second, tc.p.name+" says why it is not ready", func() error {
			status, body := tc.p.api().do("GET", "/readyz", nil)
			for _, w := range tc.want {
				if status != http.StatusServiceUnavailable || !strings.Contains(string(body), w) {
					return fmt.Errorf("readyz %d %s, want %q", status, body, w)
				}
			}
			return nil
		})
		if tg := tc.p.api().target(ns); tg["reason"] == nil || !strings.Contains(tg["reason"].(string), "waiting for the connection to the hub") {
			t.Errorf("%s target %v", tc.p.name, tg)
		}
		if l := findLine(logLines(t, tc.p), map[string]any{"level": "ERROR"}); l == nil || l["fix"] == nil {
			t.Errorf("%s: no ERROR line with a fix", tc.p.name)
		}
	}
	targetState(t, unknownNS, ns, "live")
	eventually(t, 10*time.Second, "the missing namespace's code", func() error {
		tg := unknownNS.api().target(missing)
		if tg["state"] != "failed" || tg["code"] != "NAMESPACE_NOT_FOUND" || !strings.Contains(fmt.Sprint(tg["reason"]), "the hub has no namespace") {
			return fmt.Errorf("target %v", tg)
		}
		return nil
	})
}

// Admin actions leave one INFO audit line each in the hub's log; refused requests leave an
// INFO access line with their route; an epoch bump without the current epoch changes nothing.
func TestE2E_AuditAndAccessLog(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub("--log-level", "info")
	ns := hub.api().createNamespace()
	if status, body := hub.api().do("POST", "/v1/namespaces/"+ns+"/epoch", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "expectedEpoch") {
		t.Fatalf("a bump without a body: %d %s", status, body)
	}
	hub.api().json("POST", "/v1/namespaces/"+ns+"/epoch", []byte(`{"expectedEpoch":1}`), 200, nil)
	lines := logLines(t, hub)
	if l := findLine(lines, map[string]any{"msg": "admin action", "action": "namespace-created", "namespaceId": ns, "by": "loopback"}); l == nil || l["level"] != "INFO" {
		t.Errorf("no audit line for the creation")
	}
	if l := findLine(lines, map[string]any{"msg": "admin action", "action": "epoch-bumped", "namespaceId": ns, "fromEpoch": 1, "toEpoch": 2}); l == nil {
		t.Errorf("no audit line for the bump")
	}
	if l := findLine(lines, map[string]any{"msg": "http request", "route": "POST /v1/namespaces/{id}/epoch", "status": 400, "level": "INFO"}); l == nil {
		t.Errorf("no access line for the refused bump")
	}
	if l := findLine(lines, map[string]any{"msg": "http request", "status": 201}); l != nil {
		t.Errorf("a success logged at --log-level info: %v", l)
	}
}

// Token rotation as operations.md describes it: `hub token rotate` replaces the token in one
// write (the old one no longer authenticates), the hub asks the peer to authenticate again,
// and the peer is back, replicating, once its token file holds the new token. Hub and peer
// run with --close-timeout 1h: the GOAWAY's drain must end when the namespaces have closed,
// not at its deadline, or the peer would never reach the states below. The proof is the
// peer's state sequence, from its log.
func TestE2E_TokenRotate(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub("--close-timeout", "1h")
	ns := hub.api().createNamespace()
	old := c.token("peer-a")
	a := c.startPeer("peer-a", c.tokenFile("peer-a", old), "--target", ns, "--close-timeout", "1h")
	targetState(t, a, ns, "live")

	fresh := filepath.Join(c.dir, "peer-a.token.new")
	out, err := execCommand("/bin/sh", "-c", fmt.Sprintf("%q token rotate --data %q --peer peer-a > %q", bin.hub, c.hubData(), fresh))
	if err != nil {
		t.Fatalf("hub token rotate: %v %s", err, out)
	}
	tok, _ := os.ReadFile(fresh)
	if len(strings.TrimSpace(string(tok))) != 43 || strings.TrimSpace(string(tok)) == old {
		t.Fatalf("rotate printed %q", tok)
	}
	// The hub revokes the old token: the peer is asked to re-authenticate, drains, dials at
	// once with the token it has — still the old one — and is refused.
	eventually(t, 15*time.Second, "peer-a refused with its old token", func() error {
		if status, body := a.api().do("GET", "/readyz", nil); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "HTTP 401") {
			return fmt.Errorf("readyz %d %s", status, body)
		}
		return nil
	})
	if err := os.Rename(fresh, filepath.Join(c.dir, "peer-a.token")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "peer-a back with the new token", func() error {
		if status, body := a.api().do("GET", "/readyz", nil); status != 200 {
			return fmt.Errorf("readyz %d %s", status, body)
		}
		return nil
	})
	targetState(t, a, ns, "live")
	hub.api().set(ns, map[string]any{"after": "rotation"})
	converged(t, ns, map[string]any{"after": "rotation"}, hub, a)

	// The peer's connection states from the first ready on: the drain ended without its
	// deadline, the re-authentication was immediate and refused, and the new token file
	// brought it back.
	var states []string
	for _, l := range logLines(t, a) {
		if l["msg"] == "connection-state-changed" && (len(states) > 0 || l["to"] == "ready") {
			states = append(states, fmt.Sprint(l["to"]))
		}
	}
	want := []string{"ready", "draining", "backoff", "connecting", "blocked", "disconnected", "connecting", "handshaking", "ready"}
	if !slices.Equal(states, want) {
		t.Errorf("peer-a connection states %v, want %v", states, want)
	}
	// Both sides closed the namespace with the CLOSE handshake, not at its timeout.
	for _, p := range []*proc{hub, a} {
		var path []string
		for _, l := range logLines(t, p) {
			if l["msg"] == "channel-state-changed" && l["namespaceId"] == ns && (l["from"] == "closing" || l["to"] == "closing") {
				path = append(path, fmt.Sprintf("%v→%v", l["from"], l["to"]))
			}
		}
		if len(path) != 2 || path[0] != "live→closing" || path[1] != "closing→closed" {
			t.Errorf("%s: channel %v, want live→closing→closed", p.name, path)
		}
	}
	if l := findLine(logLines(t, hub), map[string]any{"msg": "tokens file reloaded", "peersRotated": "[peer-a]"}); l == nil || l["level"] != "INFO" {
		t.Errorf("no INFO line naming the rotation in the hub's log")
	}
	if l := findLine(logLines(t, a), map[string]any{"msg": "the hub refused this peer", "status": 401}); l == nil || !strings.Contains(fmt.Sprint(l["fix"]), "hub token") {
		t.Errorf("peer-a did not say its token was refused and how to fix it")
	}
}
