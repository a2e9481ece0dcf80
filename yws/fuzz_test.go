package yws

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// FuzzDecodeMessage: any bytes decode to a message or to an error of one of the two
// classes; never a panic. A decoded message re-encodes to the same bytes (the decoder
// takes exactly one canonical message), and an awareness payload that decodes re-encodes
// to its input too.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendSync(nil, SyncStep1, []byte{0}))
	f.Add(AppendSync(nil, SyncUpdate, []byte{0, 0}))
	f.Add(AppendSync(nil, SyncStep2, []byte{1, 1, 5, 0, 4, 1, 4, 'b', 'o', 'd', 'y', 4, 1, 'x', 0}))
	f.Add(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 7, Clock: 2, State: []byte(`{"user":{"name":"a"}}`)}})))
	f.Add(AppendAwareness(nil, []byte{0}))
	f.Add([]byte{TypeQueryAwareness})
	f.Add(AppendPermissionDenied(nil, "x"))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		var again []byte
		switch m.Type {
		case TypeSync:
			again = AppendSync(nil, m.Sync, m.Payload)
		case TypeAwareness:
			again = AppendAwareness(nil, m.Payload)
			entries, err := DecodeAwareness(m.Payload, 64, 1<<20)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("unclassified awareness error %v", err)
				}
				break
			}
			if re := AppendAwarenessUpdate(nil, entries); !bytes.Equal(re, m.Payload) {
				t.Fatalf("awareness %x re-encodes to %x", m.Payload, re)
			}
		case TypeQueryAwareness:
			again = []byte{TypeQueryAwareness}
		case TypeStateless:
			again = AppendStateless(nil, m.Stateless)
		default:
			t.Fatalf("decoded a message of type %d", m.Type)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, m, again)
		}
	})
}

// fuzzFrame is one WebSocket message of FuzzConnection's input.
type fuzzFrame struct {
	text bool
	data []byte
}

// encodeFuzzFrames lays frames out as FuzzConnection reads them: per frame a kind byte
// (odd: text), a two-byte big-endian length and the bytes.
func encodeFuzzFrames(frames ...fuzzFrame) []byte {
	var out []byte
	for _, f := range frames {
		kind := byte(0)
		if f.text {
			kind = 1
		}
		out = append(out, kind, byte(len(f.data)>>8), byte(len(f.data)))
		out = append(out, f.data...)
	}
	return out
}

// decodeFuzzFrames is encodeFuzzFrames' inverse; a short last frame takes what is left, and
// at most 32 frames are read.
func decodeFuzzFrames(b []byte) []fuzzFrame {
	var out []fuzzFrame
	for len(b) > 0 && len(out) < 32 {
		f := fuzzFrame{text: b[0]&1 == 1}
		b = b[1:]
		n := 0
		for i := 0; i < 2 && len(b) > 0; i++ {
			n = n<<8 | int(b[0])
			b = b[1:]
		}
		n = min(n, len(b))
		f.data, b = b[:n], b[n:]
		out = append(out, f)
	}
	return out
}

// fuzzUpdate returns the update of one change to a fresh document.
func fuzzUpdate(change func(d *yjs.Doc)) []byte {
	d := yjs.NewDoc()
	var u []byte
	unsub := d.OnUpdate(func(b []byte, _ any) { u = append([]byte(nil), b...) })
	change(d)
	unsub()
	return u
}

// FuzzConnection: the whole read path of one editor connection — the WebSocket reads, the
// limits, the decoding, the writes through the sequencer, awareness, the refusals — fed a
// sequence of arbitrary messages over a real loopback socket to one node that lives for the
// whole run. Whatever comes, the node never panics; it either serves the connection to its
// end or closes it with a status of bad input (1003, 1007, 1009) or of a limit (1008); once
// the connection is gone nothing of it remains (connections, users, awareness states); the
// protected meta map never changes; and the node still answers a new editor's SyncStep1.
func FuzzConnection(f *testing.F) {
	text := fuzzUpdate(func(d *yjs.Doc) { d.GetText("body").Insert(0, "hello", nil) })
	meta := fuzzUpdate(func(d *yjs.Doc) { d.GetMap("meta").Set("replicationEpoch", 99) })
	aware := AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 7, Clock: 1, State: []byte(`{"user":{"name":"a"}}`)}}))
	bin := func(b []byte) fuzzFrame { return fuzzFrame{data: b} }
	f.Add([]byte{})
	f.Add(encodeFuzzFrames(bin(AppendSync(nil, SyncStep1, []byte{0}))))
	f.Add(encodeFuzzFrames(bin(AppendSync(nil, SyncStep2, text)), bin(AppendSync(nil, SyncUpdate, text))))
	f.Add(encodeFuzzFrames(bin(aware), bin([]byte{TypeQueryAwareness}), bin(AppendAwareness(nil, AppendAwarenessUpdate(nil,
		[]AwarenessEntry{{ClientID: 7, Clock: 2, State: []byte("null")}})))))
	f.Add(encodeFuzzFrames(bin(aware))) // a state left to the connection's end
	f.Add(encodeFuzzFrames(bin(AppendSync(nil, SyncUpdate, meta)), bin(AppendSync(nil, SyncUpdate, text))))
	f.Add(encodeFuzzFrames(fuzzFrame{text: true, data: []byte("hello")}))
	f.Add(encodeFuzzFrames(bin(AppendSync(nil, SyncUpdate, text)[:6])))
	f.Add(encodeFuzzFrames(bin(AppendPermissionDenied(nil, "x")), bin([]byte{9})))

	e := newEnv(f, nil)
	ctx := context.Background()
	initialMeta := fuzzMeta(f, e)
	f.Fuzz(func(t *testing.T, in []byte) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(wctx, e.url(e.ns, "writer"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(64 << 20)
		defer ws.CloseNow()
		// Every SyncStep1 is answered with a SyncStep2, in order: after the input, a probe's
		// answer tells that the node handled all of it.
		answers := 1
		for _, fr := range decodeFuzzFrames(in) {
			typ := websocket.MessageBinary
			if fr.text {
				typ = websocket.MessageText
			} else if m, err := DecodeMessage(fr.data); err == nil && m.Type == TypeSync && m.Sync == SyncStep1 {
				answers++
			}
			if ws.Write(wctx, typ, fr.data) != nil {
				break // the node closed the connection
			}
		}
		ws.Write(wctx, websocket.MessageBinary, AppendSync(nil, SyncStep1, []byte{0}))
		for answers > 0 {
			_, b, err := ws.Read(wctx)
			if err != nil {
				switch code := websocket.CloseStatus(err); code {
				case websocket.StatusUnsupportedData, websocket.StatusInvalidFramePayloadData,
					websocket.StatusPolicyViolation, websocket.StatusMessageTooBig:
				default:
					t.Fatalf("the connection ended with %d (%v)", code, err)
				}
				break
			}
			if m, err := DecodeMessage(b); err == nil && m.Type == TypeSync && m.Sync == SyncStep2 {
				answers--
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")

		waitFuzz(t, "the connection's end", func() bool {
			e.srv.users.mu.Lock()
			users := len(e.srv.users.open)
			e.srv.users.mu.Unlock()
			return e.srv.Clients() == 0 && users == 0 && e.metricFor(t, "nomicore_client_connections") == 0
		})
		if n := e.metricFor(t, "nomicore_client_awareness_states"); n != 0 {
			t.Fatalf("%v awareness states outlive their connection", n)
		}
		if m := fuzzMeta(t, e); !reflect.DeepEqual(m, initialMeta) {
			t.Fatalf("meta changed: %v, was %v", m, initialMeta)
		}
		fresh, _, err := websocket.Dial(wctx, e.url(e.ns, "reader"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.CloseNow()
		fresh.SetReadLimit(64 << 20)
		if err := fresh.Write(wctx, websocket.MessageBinary, AppendSync(nil, SyncStep1, []byte{0})); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := fresh.Read(wctx)
			if err != nil {
				t.Fatalf("a new editor's SyncStep1 is not answered: %v", err)
			}
			if m, err := DecodeMessage(b); err == nil && m.Type == TypeSync && m.Sync == SyncStep2 {
				break
			}
		}
		fresh.Close(websocket.StatusNormalClosure, "")
		waitFuzz(t, "the new editor's end", func() bool { return e.srv.Clients() == 0 })
	})
}

// fuzzMeta reads the protected meta map of the env's namespace.
func fuzzMeta(t testing.TB, e *env) any {
	t.Helper()
	l, err := e.reg.Open(context.Background(), "default", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	doc, err := l.JSON(context.Background(), registry.Root{Name: "meta", Kind: yjs.KindMap})
	if err != nil {
		t.Fatal(err)
	}
	return doc["meta"]
}

// waitFuzz waits (bounded) until cond holds.
func waitFuzz(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
