package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Local writes that cannot replicate, and the recovery of failed targets, through the
// binaries: what the peer's admin API, /readyz, /metrics and editor endpoint say, and what
// an operator does about it.

// readyz returns a process's /readyz status and body.
func readyz(p *proc) (int, string) {
	status, b := p.api().do("GET", "/readyz", nil)
	return status, string(b)
}

// upgradeStatus makes a plain WebSocket upgrade request to a node's editor endpoint and
// returns the status and body of the refusal (101 when it was accepted).
func upgradeStatus(t *testing.T, p *proc, ns, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+p.client+"/v1/yjs/"+ns+"?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "" // the body is the WebSocket now
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// mapUpdateOn returns an update that sets key in the root map "notes" of ns, made on the
// document a process holds now.
func mapUpdateOn(t *testing.T, p *proc, ns, key string, value any) []byte {
	t.Helper()
	status, state := p.api().do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("GET update on %s: %d %s", p.name, status, state)
	}
	u, err := mapSet(state, key, value)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestE2E_FailedTargetRecovers: writes a peer takes while the hub is away are reported until
// they replicate (the target's unreplicatedBytes, /readyz, a metric). When they cannot —
// more than the hub's --max-chunked-sync-diff-bytes — the target fails with
// SYNC_TRANSFER_TOO_LARGE and says so: its code, that it is retried and when, the flag to
// raise; the peer refuses further local writes (409 REPLICA_FAILED) and editors (409) and
// stays not ready. Two ways out, without restarting the peer: a reset (the offline writes
// are archived and the replica bootstraps again), and raising the cap (the hub restarted
// with the default: the next connection opens the target and the writes reach the hub).
func TestE2E_FailedTargetRecovers(t *testing.T) {
	const smallCap = "1048576"
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub("--max-chunked-sync-diff-bytes", smallCap)
	ns := hub.api().createNamespace()
	hub.api().set(ns, map[string]any{"from": "hub"})
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")
	editorToken := c.clientToken("peer-a", "ed")

	offline := func(fill byte) {
		t.Helper()
		hub.stop()
		writeText(t, a, ns, 1536<<10, 512<<10, fill) // three writes, 204 each: offline writes are taken
		tg := a.api().target(ns)
		if n, _ := tg["unreplicatedBytes"].(float64); n < 1536<<10 {
			t.Fatalf("unreplicated bytes %v after the offline writes: %v", tg["unreplicatedBytes"], tg)
		}
		if got := a.api().metric(`nomicore_local_writes_unreplicated_bytes{side="peer"}`); got < 1536<<10 {
			t.Fatalf("nomicore_local_writes_unreplicated_bytes = %v", got)
		}
		if status, body := readyz(a); status != 503 || !strings.Contains(body, "bytes of local writes") {
			t.Fatalf("readyz while the hub is away: %d %s", status, body)
		}
		c.startHub("--max-chunked-sync-diff-bytes", smallCap)
		targetFailed(t, a, ns, "SYNC_TRANSFER_TOO_LARGE")
		tg = a.api().target(ns)
		retry, _ := tg["retry"].(map[string]any)
		reason, _ := tg["reason"].(string)
		if retry == nil || retry["recovery"] != "after-config" || retry["at"] == nil ||
			!strings.Contains(reason, "--max-chunked-sync-diff-bytes") || !strings.Contains(reason, "retried at") ||
			!strings.Contains(reason, "bytes of local writes not replicated yet") {
			t.Fatalf("failed target: %v", tg)
		}
		status, b := a.api().do("POST", "/v1/namespaces/"+ns+"/update", mapUpdateOn(t, a, ns, "refused", true))
		if status != 409 || !strings.Contains(string(b), "REPLICA_FAILED") || !strings.Contains(string(b), "SYNC_TRANSFER_TOO_LARGE") {
			t.Fatalf("a local write to the failed replica: %d %s", status, b)
		}
		if got := a.api().metric(`nomicore_local_writes_refused_total{reason="failed",side="peer"}`); got < 1 {
			t.Fatalf("refused local writes = %v", got)
		}
		if status, body := upgradeStatus(t, a, ns, editorToken); status != 409 || !strings.Contains(body, "REPLICA_FAILED") {
			t.Fatalf("an editor on the failed replica: %d %s", status, body)
		}
		if status, body := readyz(a); status != 503 || !strings.Contains(body, "bytes of local writes") {
			t.Fatalf("readyz with a failed target holding writes: %d %s", status, body)
		}
	}

	// The way out that drops the offline writes: a reset.
	offline('r')
	status, b := a.api().do("POST", "/v1/targets/"+ns+"/reset", nil)
	if status != 200 {
		t.Fatalf("reset: %d %s", status, b)
	}
	targetState(t, a, ns, "live")
	converged(t, ns, map[string]any{"from": "hub"}, hub, a)
	if n := textLen(t, a, ns); n != 0 {
		t.Fatalf("the reset replica kept %d bytes of text", n)
	}
	eventually(t, 10*time.Second, "ready after the reset", func() error {
		if status, body := readyz(a); status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	a.api().set(ns, map[string]any{"after": "reset"})
	converged(t, ns, map[string]any{"from": "hub", "after": "reset"}, hub, a)

	// The way out that keeps them: the operator raises the cap (here: back to the default)
	// and restarts the hub; the peer is not touched.
	offline('k')
	hub.stop()
	c.startHub()
	targetState(t, a, ns, "live")
	sameState(t, ns, 60*time.Second, hub, a)
	if n := textLen(t, hub, ns); n != 1536<<10 {
		t.Fatalf("the hub's text has %d bytes, want the peer's %d", n, 1536<<10)
	}
	eventually(t, 10*time.Second, "ready and nothing unreplicated", func() error {
		if tg := a.api().target(ns); tg["unreplicatedBytes"] != nil {
			return fmt.Errorf("target %v", tg)
		}
		if status, body := readyz(a); status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	if status, _ := upgradeStatus(t, a, ns, editorToken); status != 101 {
		t.Fatalf("an editor after the recovery: %d", status)
	}
}

// TestE2E_LocalWriteOverWhatAV1HubCarries: a peer (v2) connected to a hub of the v1
// generation refuses at the door a local write larger than one message carries — 413
// naming the limit through the admin API, PermissionDenied for an editor's paste — where it
// used to take it and fail the namespace; writes within the limit replicate.
func TestE2E_LocalWriteOverWhatAV1HubCarries(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub("--generation", "v1")
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")

	status, b := a.api().do("POST", "/v1/namespaces/"+ns+"/update", mapUpdateOn(t, a, ns, "big", strings.Repeat("x", 600<<10)))
	if status != 413 || !strings.Contains(string(b), "UPDATE_TOO_LARGE") || !strings.Contains(string(b), "524288") ||
		!strings.Contains(string(b), "v1") {
		t.Fatalf("a 600 KiB write with a v1 hub: %d %s", status, b)
	}
	a.api().set(ns, map[string]any{"small": "ok"})
	converged(t, ns, map[string]any{"small": "ok"}, hub, a)

	ag.open("ed", a, ns, c.clientToken("peer-a", "ed"))
	ag.insert("ed", 0, strings.Repeat("p", 600<<10))
	if ev := ag.waitEvent("ed", "permission-denied"); !strings.Contains(ev.Reason, "524288") {
		t.Fatalf("the editor's refusal: %+v", ev)
	}
	targetState(t, a, ns, "live")
	if n := textLen(t, a, ns); n != 0 {
		t.Fatalf("the refused paste reached the peer's document (%d bytes)", n)
	}
	if got := a.api().metric(`nomicore_local_writes_refused_total{reason="too-large",side="peer"}`); got != 2 {
		t.Fatalf("refused local writes (too-large) = %v", got)
	}
}
