package e2e

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/node/framecap"
	"github.com/nomicore/nomicore/yjs"
)

// capturedFrame is one message of a --capture-frames file.
type capturedFrame struct {
	dir, conn string
	msg       []byte
}

// readCapture reads a --capture-frames file (comment lines skipped).
func readCapture(t *testing.T, path string) []capturedFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []capturedFrame
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("%s: capture line %q: want time, direction, connection, message", path, line)
		}
		msg, err := hex.DecodeString(fields[3])
		if err != nil {
			t.Fatalf("%s: capture line %q: %v", path, line, err)
		}
		out = append(out, capturedFrame{dir: fields[1], conn: fields[2], msg: msg})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scriptedUpdates are the document writes of the scripted exchange: Yjs updates of a
// document with a fixed client id, each extending the one before.
func scriptedUpdates(t *testing.T, clientID uint32, texts ...string) [][]byte {
	t.Helper()
	doc := yjs.NewDoc(yjs.WithClientID(clientID))
	var ups [][]byte
	off := doc.OnUpdate(func(u []byte, _ any) { ups = append(ups, append([]byte(nil), u...)) })
	defer off()
	for _, s := range texts {
		x := doc.GetText("body")
		if err := x.Insert(x.Len(), s, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ups
}

// interopRun is what one run of the scripted exchange left: each peer's capture file.
type interopRun struct {
	captures map[string]string // peer name → its --capture-frames file
}

// scriptedInteropExchange runs one deterministic exchange against a hub started from a copy
// of the data directory template (so the namespace, its replication id and the hub's Yjs
// client id are the same in every run) with --presence-relay hubRelay, and three peers that
// capture their frames: peer-on (the relay on, as shipped), peer-off (--presence-relay off)
// and peer-v1 (--generation v1). Editors with presence are open on the hub and on every
// peer, so that presence exists that could leak; the document writes are fixed Yjs updates
// (fixed client ids) through the admin APIs, each waited for everywhere before the next.
func scriptedInteropExchange(t *testing.T, ag *agent, template, ns, hubRelay string) interopRun {
	t.Helper()
	c := newCluster(t)
	copyDir(t, template, c.hubData())
	// No periodic reconciliation during the run: every frame comes from the script.
	quiet := []string{"--reconcile-interval", "10m"}
	hub := c.startHub(append([]string{"--presence-relay", hubRelay}, quiet...)...)
	run := interopRun{captures: map[string]string{}}
	peers := map[string]*proc{}
	names := []string{"peer-on", "peer-off", "peer-v1"}
	extra := map[string][]string{"peer-off": {"--presence-relay", "off"}, "peer-v1": {"--generation", "v1"}}
	for _, name := range names {
		run.captures[name] = filepath.Join(c.dir, name+".frames")
		args := append([]string{"--target", ns, "--capture-frames", run.captures[name]}, quiet...)
		peers[name] = c.startPeer(name, c.tokenFile(name, c.token(name)), append(args, extra[name]...)...)
		targetState(t, peers[name], ns, "live")
	}
	ag.open("hal-"+hubRelay, hub, ns, c.clientToken("hub", "alice"))
	ag.setPresence("hal-"+hubRelay, presenceOf("hal", 0))
	for i, name := range names {
		e := name + "-" + hubRelay
		ag.open(e, peers[name], ns, c.clientToken(name, "bob"))
		ag.setPresence(e, presenceOf(e, i+1))
	}
	if hubRelay == "on" {
		// The relay is at work during the run: peer-on's editor and the hub's see each other.
		ag.waitPresence("peer-on-on", "hal", nil)
		ag.waitPresence("hal-on", "peer-on-on", nil)
	}
	all := []*proc{hub, peers["peer-on"], peers["peer-off"], peers["peer-v1"]}
	want := ""
	write := func(p *proc, u []byte, text string) {
		if status, b := p.api().do("POST", "/v1/namespaces/"+ns+"/update", u); status != 204 {
			t.Fatalf("POST update on %s: %d %s", p.name, status, b)
		}
		want += text
		waitBody(t, ns, want, all...)
	}
	hubTexts := []string{"one ", "two ", "three "}
	for i, u := range scriptedUpdates(t, 1001, hubTexts...) {
		write(hub, u, hubTexts[i])
	}
	// Writes on the peers without the extension, after the hub's (appended: their documents
	// hold the hub's text, and a fresh document with a fixed client id appends at index 0 of
	// an empty text, so each writes under a client id of its own on top of what it holds).
	for i, name := range []string{"peer-off", "peer-v1"} {
		write(peers[name], appendUpdate(t, peers[name], ns, uint32(2001+i), name+" "), name+" ")
	}
	time.Sleep(time.Second) // presence that would cross a connection has had the time to
	for _, name := range names {
		ag.must("close", map[string]any{"name": name + "-" + hubRelay}, nil)
		peers[name].stop()
	}
	ag.must("close", map[string]any{"name": "hal-" + hubRelay}, nil)
	hub.stop()
	return run
}

// appendUpdate returns the Yjs update that appends text to the "body" text of ns as p holds
// it, written by a document with client id clientID.
func appendUpdate(t *testing.T, p *proc, ns string, clientID uint32, text string) []byte {
	t.Helper()
	status, state := p.api().do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("GET update on %s: %d %s", p.name, status, state)
	}
	doc := yjs.NewDoc(yjs.WithClientID(clientID))
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		t.Fatal(err)
	}
	var update []byte
	off := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	defer off()
	x := doc.GetText("body")
	if err := x.Insert(x.Len(), text, nil); err != nil {
		t.Fatal(err)
	}
	return update
}

// maskedFrames returns the frames of a capture by direction ("in", "out"), each with the
// values that are random per connection replaced by fixed bytes of the same length, with
// their decoded form. Masked, and only these: in each HELLO and HELLO_ACK, its
// connectionNonce (each occurrence of its bytes in that frame), and the connection ids the
// HELLO_ACKs give (each occurrence of their text in any frame). The capture's per-line
// time and connection id column are not part of the frames and are not compared. Each
// masked value must be found where it belongs — otherwise the mask would hide nothing or
// the wrong thing — and the test fails if not.
func maskedFrames(t *testing.T, path string) (frames map[string][][]byte, decoded map[string][]map[string]any) {
	t.Helper()
	raw := readCapture(t, path)
	dec := decodeCaptureJSON(t, path)
	if len(raw) != len(dec) {
		t.Fatalf("%s: %d captured messages, %d decoded", path, len(raw), len(dec))
	}
	var connIDs [][]byte
	for _, f := range dec {
		if m, _ := f["payload"].(map[string]any); f["type"] == "HELLO_ACK" {
			id, _ := m["connectionId"].(string)
			if id == "" {
				t.Fatalf("%s: a HELLO_ACK without a connection id: %v", path, f)
			}
			connIDs = append(connIDs, []byte(id))
		}
	}
	if len(connIDs) == 0 {
		t.Fatalf("%s: no HELLO_ACK: the peer never connected", path)
	}
	frames, decoded = map[string][][]byte{}, map[string][]map[string]any{}
	for i, f := range raw {
		msg := append([]byte(nil), f.msg...)
		m, _ := dec[i]["payload"].(map[string]any)
		if typ := dec[i]["type"]; typ == "HELLO" || typ == "HELLO_ACK" {
			nonce, err := hex.DecodeString(fmt.Sprint(m["connectionNonce"]))
			if err != nil || len(nonce) == 0 || !bytes.Contains(msg, nonce) {
				t.Fatalf("%s: the %s's connection nonce %v is not in its bytes %x", path, typ, m["connectionNonce"], msg)
			}
			msg = bytes.ReplaceAll(msg, nonce, make([]byte, len(nonce)))
			if id, _ := m["connectionId"].(string); typ == "HELLO_ACK" && !bytes.Contains(msg, []byte(id)) {
				t.Fatalf("%s: the HELLO_ACK's connection id %q is not in its bytes", path, id)
			}
		}
		for _, id := range connIDs {
			msg = bytes.ReplaceAll(msg, id, bytes.Repeat([]byte("x"), len(id)))
		}
		frames[f.dir] = append(frames[f.dir], msg)
		decoded[f.dir] = append(decoded[f.dir], dec[i])
	}
	return frames, decoded
}

// Interop, frame for frame: the same scripted exchange runs twice — against a hub with the
// presence relay on (as shipped) and against one with --presence-relay off, which does not
// offer the extension, i.e. replicates as before it existed — with a peer with
// --presence-relay off and a --generation v1 peer attached, editors with presence on every
// node. Each of these two peers' frames, received and sent, must be byte-identical between
// the runs once the values random per connection are masked (maskedFrames says which): a
// PRESENCE frame, a HELLO_ACK selecting another capability or any other difference the
// relay would make on their connections fails it. A peer with the relay on is attached too,
// and receives PRESENCE frames in the first run (the relay was at work).
func TestE2E_Editors_PresenceInteropFramesExact(t *testing.T) {
	ag := startAgent(t)
	// The template: a hub's data directory with one namespace, copied for each run.
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	hub.stop()

	on := scriptedInteropExchange(t, ag, c.hubData(), ns, "on")
	off := scriptedInteropExchange(t, ag, c.hubData(), ns, "off")

	presence := 0
	for _, f := range decodeCaptureJSON(t, on.captures["peer-on"]) {
		if f["type"] == "PRESENCE" {
			presence++
		}
	}
	if presence == 0 {
		t.Error("peer-on received no PRESENCE frame from the hub with the relay on: the relay was not at work")
	}
	for _, name := range []string{"peer-off", "peer-v1"} {
		got, gotDec := maskedFrames(t, on.captures[name])
		want, wantDec := maskedFrames(t, off.captures[name])
		same := true
		for _, dir := range []string{framecap.In, framecap.Out} {
			n := max(len(got[dir]), len(want[dir]))
			for i := range n {
				if i >= len(got[dir]) || i >= len(want[dir]) || !bytes.Equal(got[dir][i], want[dir][i]) {
					var g, w any = "(none)", "(none)"
					if i < len(got[dir]) {
						g = gotDec[dir][i]
					}
					if i < len(want[dir]) {
						w = wantDec[dir][i]
					}
					t.Errorf("%s, frame %d %s (of %d with the relay on, %d off): with the hub's relay on %v; off %v",
						name, i+1, dir, len(got[dir]), len(want[dir]), g, w)
					same = false
					break
				}
			}
		}
		if same {
			t.Logf("%s: %d frames received and %d sent, identical with the hub's presence relay on and off", name, len(want[framecap.In]), len(want[framecap.Out]))
		}
	}
}
