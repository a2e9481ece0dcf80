package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --capture-frames on both binaries: a real session (handshake, a namespace opened,
// bootstrapped and live, a write replicated) is written to each capture file as it
// travelled, and `nmcr frame decode` reads both files back into frames: the hub's shows
// HELLO in and HELLO_ACK out under the connection id, the peer's the same pair the other way
// round, HELLO under no id yet and the rest under the hub's id; the written UPDATE leaves
// the peer and reaches the hub. Meanwhile /metrics counts the open connections and the
// goroutines.
func TestE2E_CaptureFramesDecodes(t *testing.T) {
	c := newCluster(t)
	token := c.token("peer-a")
	hubCap, peerCap := filepath.Join(c.dir, "hub.frames"), filepath.Join(c.dir, "peer.frames")
	hub := c.startHub("--capture-frames", hubCap)
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", c.tokenFile("peer-a", token), "--capture-frames", peerCap, "--target", ns)
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"k": "captured"})
	converged(t, ns, map[string]any{"k": "captured"}, hub, a)
	// The leak-check gauges: one connection open on each side, goroutines counted.
	if n := hub.api().metric(`nomicore_connections_open{side="hub"}`); n != 1 {
		t.Errorf("hub nomicore_connections_open = %v, want 1", n)
	}
	if n := a.api().metric(`nomicore_connections_open{side="peer"}`); n != 1 {
		t.Errorf("peer nomicore_connections_open = %v, want 1", n)
	}
	if n := hub.api().metric(`nomicore_goroutines{side="hub"}`); n < 5 {
		t.Errorf("hub nomicore_goroutines = %v", n)
	}
	a.stop()
	eventually(t, 15*time.Second, "hub connection gone", func() error {
		if n := hub.api().metric(`nomicore_connections_open{side="hub"}`); n != 0 {
			return fmt.Errorf("%v connections open after the peer stopped", n)
		}
		return nil
	})
	hub.stop()

	for _, f := range []string{hubCap, peerCap} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	hubFrames, peerFrames := decodeCapture(t, hubCap), decodeCapture(t, peerCap)
	connID := ""
	for _, f := range hubFrames {
		if f.Type == "HELLO_ACK" && f.Direction == "out" {
			connID = f.ConnectionID
		}
	}
	if !strings.HasPrefix(connID, "c-") {
		t.Fatalf("hub capture: no HELLO_ACK out with a connection id: %+v", hubFrames)
	}
	want := func(frames []capFrame, dir, typ, id string) {
		t.Helper()
		for _, f := range frames {
			if f.Direction == dir && f.Type == typ && f.ConnectionID == id {
				return
			}
		}
		t.Errorf("no %s %s frame on connection %q in %+v", dir, typ, id, frames)
	}
	want(hubFrames, "in", "HELLO", connID)
	want(hubFrames, "in", "OPEN_NAMESPACE", connID)
	want(hubFrames, "out", "OPEN_OK", connID)
	want(hubFrames, "in", "UPDATE", connID)
	want(hubFrames, "out", "UPDATE_ACK", connID)
	want(peerFrames, "out", "HELLO", "-")
	want(peerFrames, "in", "HELLO_ACK", "-")
	want(peerFrames, "out", "OPEN_NAMESPACE", connID)
	want(peerFrames, "out", "UPDATE", connID)
	want(peerFrames, "in", "UPDATE_ACK", connID)
}

type capFrame struct {
	Direction    string `json:"direction"`
	ConnectionID string `json:"connectionId"`
	Type         string `json:"type"`
}

// decodeCapture runs `nmcr frame decode` on a capture file.
func decodeCapture(t *testing.T, path string) []capFrame {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin.nmcr, "frame", "decode", "--chunked")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nmcr frame decode %s: %v: %s", path, err, stderr.String())
	}
	var frames []capFrame
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f capFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("decode output line %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	if len(frames) == 0 {
		t.Fatalf("%s decoded to no frame", path)
	}
	return frames
}
