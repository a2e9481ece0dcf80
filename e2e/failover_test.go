package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sessionOf returns the state of peer's session on the hub's copy of ns ("" when none).
func sessionOf(t *testing.T, hub *proc, ns, peer string) string {
	t.Helper()
	status, b := hub.api().do("GET", "/v1/namespaces/"+ns, nil)
	if status != 200 {
		return ""
	}
	var st struct {
		Sessions []struct{ PeerInstanceID, State string }
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sessions {
		if s.PeerInstanceID == peer {
			return s.State
		}
	}
	return ""
}

// A peer given two --hub-url (two single-node hubs serving copies of the same data, as the
// nodes of a cluster would) replicates with the first; when that one dies it fails over to
// the second, and back when the second dies and the first is up again.
func TestE2E_HubURLFailover(t *testing.T) {
	a := newCluster(t)
	hubA := a.startHub()
	ns := hubA.api().createNamespace()
	tok := a.token("peer-a")
	hubA.stop()
	// Hub B starts from a copy of A's data: the same namespace and identity, the same tokens.
	b := newCluster(t)
	copyDir(t, a.hubData(), b.hubData())
	hubB := b.startHub()
	a.startHub()
	urlA, urlB := "ws://"+a.hubRepl+"/v1/replication", "ws://"+b.hubRepl+"/v1/replication"
	p := a.startPeer("peer-a", a.tokenFile("peer-a", tok), "--target", ns, "--hub-url", urlA, "--hub-url", urlB)
	targetState(t, p, ns, "live")
	if s := sessionOf(t, hubA, ns, "peer-a"); s != "live" {
		t.Fatalf("on hub A the peer's session is %q, want live (the first --hub-url)", s)
	}
	if s := sessionOf(t, hubB, ns, "peer-a"); s != "" {
		t.Fatalf("the peer also replicates with hub B (%q)", s)
	}

	hubA.kill()
	eventually(t, 30*time.Second, "the peer live on hub B", func() error {
		if s := sessionOf(t, hubB, ns, "peer-a"); s != "live" {
			return fmt.Errorf("session on B %q", s)
		}
		return nil
	})
	targetState(t, p, ns, "live")
	p.api().set(ns, map[string]any{"via": "b"})
	converged(t, ns, map[string]any{"via": "b"}, p, hubB)

	a.startHub()
	hubB.kill()
	eventually(t, 30*time.Second, "the peer back on hub A", func() error {
		if s := sessionOf(t, hubA, ns, "peer-a"); s != "live" {
			return fmt.Errorf("session on A %q", s)
		}
		return nil
	})
	converged(t, ns, map[string]any{"via": "b"}, p, hubA)
}

// copyDir copies the regular files of dir src into dst (created, mode 0700).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
