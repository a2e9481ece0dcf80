package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A hub and two peers: namespace creation, writes on either peer and on the hub converge
// everywhere; a peer killed with SIGKILL keeps its flushed writes and comes back by
// reconciliation, not a new bootstrap; a hub killed with SIGKILL comes back and the peers
// reconnect and converge; an epoch bump conflicts the peers and a reset recovers them;
// /metrics exposes the expected series; SIGINT shuts everything down in order.
func TestE2E_ReplicationLifecycle(t *testing.T) {
	c := newCluster(t)
	tokA := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub()
	ns := hub.api().createNamespace()

	// peer-a gets its target from the command line; peer-b's token is added while the hub
	// runs and its target through its admin API.
	a := c.startPeer("peer-a", tokA, "--target", ns)
	tokB := c.tokenFile("peer-b", c.token("peer-b"))
	b := c.startPeer("peer-b", tokB)
	b.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`","owner":"default"}`), 201, nil)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")

	// Writes anywhere converge everywhere.
	a.api().set(ns, map[string]any{"fromA": "a1"})
	b.api().set(ns, map[string]any{"fromB": "b1"})
	hub.api().set(ns, map[string]any{"fromHub": "h1"})
	converged(t, ns, map[string]any{"fromA": "a1", "fromB": "b1", "fromHub": "h1"}, hub, a, b)
	if got := a.api().metric(`nomicore_events_total{side="peer",type="bootstrap-imported"}`); got != 1 {
		t.Fatalf("peer-a bootstrap-imported = %v at first start, want 1", got)
	}

	// SIGKILL peer-a right after a durable write.
	a.api().set(ns, map[string]any{"durableA": "d1"})
	a.kill()
	b.api().set(ns, map[string]any{"whileAdown": "b2"})
	// Restarted unable to reach any hub: its own flushed write is in its store.
	dead := freeAddr(t)
	a.args = nil
	c.startPeer("peer-a", tokA, "--hub-url", "ws://"+dead+"/v1/replication")
	if n, status := a.api().notes(ns); status != 200 || n["durableA"] != "d1" {
		t.Fatalf("after SIGKILL peer-a's flushed write is lost: %d %v", status, n)
	}
	a.stop()
	// Restarted for real (its targets come from its store, not the command line): it
	// reconciles with the hub — no bootstrap — and converges.
	c.startPeer("peer-a", tokA)
	targetState(t, a, ns, "live")
	converged(t, ns, map[string]any{"durableA": "d1", "whileAdown": "b2", "fromHub": "h1"}, hub, a, b)
	if got := a.api().metric(`nomicore_events_total{side="peer",type="bootstrap-imported"}`); got != 0 {
		t.Fatalf("restarted peer-a bootstrapped again (%v bootstrap-imported events); want reconcile only", got)
	}
	if got := a.api().metric(`nomicore_events_total{side="peer",type="sync-diff-applied"}`); got < 1 {
		t.Fatalf("restarted peer-a applied no sync diff (%v)", got)
	}

	// SIGKILL the hub; the peers keep taking local writes; the hub restarts on the same
	// ports and data, the peers reconnect on their own and everything converges.
	hub.kill()
	a.api().set(ns, map[string]any{"hubDownA": "a3"})
	b.api().set(ns, map[string]any{"hubDownB": "b3"})
	eventually(t, 10*time.Second, "peers notice the hub is gone", func() error {
		for _, p := range []*proc{a, b} {
			if status, _ := p.api().do("GET", "/readyz", nil); status != http.StatusServiceUnavailable {
				return fmt.Errorf("%s readyz %d", p.name, status)
			}
		}
		return nil
	})
	c.startHub()
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	converged(t, ns, map[string]any{"hubDownA": "a3", "hubDownB": "b3", "durableA": "d1", "fromB": "b1"}, hub, a, b)
	for _, p := range []*proc{a, b} {
		if status, body := p.api().do("GET", "/readyz", nil); status != 200 {
			t.Fatalf("%s not ready after the hub came back: %d %s", p.name, status, body)
		}
	}

	// A schema replaced on the hub is re-armed by both peers (docs/protocol.md#events): the
	// same fingerprint and updatedAt everywhere, and one schema-rearm-applied per peer.
	type schemaStatus struct {
		Schema *struct{ SemanticFingerprint, UpdatedAt string }
	}
	var replaced struct{ SemanticFingerprint, UpdatedAt string }
	hub.api().json("PUT", "/v1/namespaces/"+ns+"/schema", []byte(`{"definition":{"type":"object","title":"Note"},"expectedFingerprint":""}`), 200, &replaced)
	for _, p := range []*proc{a, b} {
		const rearms = `nomicore_events_total{side="peer",type="schema-rearm-applied"}`
		eventually(t, 10*time.Second, p.name+" re-arms the schema", func() error {
			var st schemaStatus
			p.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
			if st.Schema == nil || *st.Schema != replaced {
				return fmt.Errorf("%s schema %+v, want %+v", p.name, st.Schema, replaced)
			}
			// The schema is installed in the apply's slot; the event follows in its
			// settlement continuation.
			if p.api().metric(rearms) == 0 {
				return fmt.Errorf("%s: no schema-rearm-applied yet", p.name)
			}
			return nil
		})
		if got := p.api().metric(rearms); got != 1 {
			t.Fatalf("%s schema-rearm-applied = %v, want 1", p.name, got)
		}
	}

	// docs/protocol.md#identity-fencing epoch bump: both peers end conflicted; a reset
	// bootstraps them again.
	var bumped struct{ ReplicationEpoch uint64 }
	hub.api().json("POST", "/v1/namespaces/"+ns+"/epoch", []byte(`{"expectedEpoch":1}`), 200, &bumped)
	if bumped.ReplicationEpoch != 2 {
		t.Fatalf("epoch bump answered %d", bumped.ReplicationEpoch)
	}
	targetState(t, a, ns, "conflicted")
	targetState(t, b, ns, "conflicted")
	if status, body := a.api().do("POST", "/v1/namespaces/"+ns+"/update", []byte{0}); status != http.StatusConflict ||
		!strings.Contains(string(body), "REPLICA_CONFLICTED") {
		t.Fatalf("a write to a conflicted replica: %d %s", status, body)
	}
	for _, p := range []*proc{a, b} {
		p.api().json("POST", "/v1/namespaces/"+ns+"/reset", nil, 200, nil)
		targetState(t, p, ns, "live")
		var st struct{ ReplicationEpoch uint64 }
		p.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
		if st.ReplicationEpoch != 2 {
			t.Fatalf("%s after reset: epoch %d", p.name, st.ReplicationEpoch)
		}
	}
	a.api().set(ns, map[string]any{"afterReset": "r1"})
	converged(t, ns, map[string]any{"afterReset": "r1", "hubDownB": "b3"}, hub, a, b)

	// Metrics on both sides (the hub counts since its restart).
	eventually(t, 10*time.Second, "hub connections gauge", func() error {
		if v := hub.api().metric(`nomicore_connections_ready{side="hub"}`); v != 2 {
			return fmt.Errorf("nomicore_connections_ready = %v", v)
		}
		return nil
	})
	hubMetrics := hub.api().metricsText()
	for _, s := range []string{
		`nomicore_events_total{side="hub",type="update-applied"}`,
		`nomicore_events_total{side="hub",type="bootstrap-snapshot-sent"}`,
		`nomicore_live_sessions{side="hub"} 2`,   // one namespace, two peers: two sessions
		`nomicore_live_namespaces{side="hub"} 2`, // the same count under its earlier name, for existing dashboards
		`nomicore_update_bytes_bucket{side="hub",type="update-applied",le=`,
		`nomicore_apply_latency_seconds_count{side="hub",type="update-applied"}`,
		`nomicore_store_healthy{side="hub"} 1`,
		`nomicore_store_commits_total{side="hub"}`,
		`nomicore_queued_bytes{side="hub"}`,
		`nomicore_in_flight_updates{side="hub"}`,
	} {
		if !strings.Contains(hubMetrics, s) {
			t.Errorf("hub /metrics lacks %s", s)
		}
	}
	for _, s := range []string{`nomicore_connections_ready{side="peer"} 1`, `nomicore_live_sessions{side="peer"} 1`,
		`nomicore_events_total{side="peer",type="update-sent"}`, `nomicore_connection_backoffs_total{reason=`,
		`nomicore_queued_bytes{side="peer"}`, `nomicore_in_flight_updates{side="peer"}`} {
		if !strings.Contains(a.api().metricsText(), s) {
			t.Errorf("peer-a /metrics lacks %s", s)
		}
	}

	// Orderly shutdown: every process exits 0.
	a.stop()
	b.stop()
	hub.stop()
}
