package yws

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/yjs"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

// FuzzHocuspocusConnection: the whole read path of one Hocuspocus socket — the WebSocket
// reads, the socket's limits and bounds, the framing, the documents' authentication and the
// frames held meanwhile, the writes through the sequencer, awareness, stateless messages,
// CLOSE, token refreshes — fed a sequence of arbitrary messages over a real loopback socket
// to one node that lives for the whole run. Whatever comes, the node never panics; after the
// input a probe document on the same socket is answered (its SyncStep2), or the socket was
// closed with a status of bad input (1003, 1007, 1009), of a limit (1008) or of the bound on
// held messages (4205); once the socket is gone nothing of it remains (sockets, users'
// places, awareness states); the protected meta map never changes; and a new socket's
// document still syncs.
func FuzzHocuspocusConnection(f *testing.F) {
	e := newEnv(f, nil)
	ns := e.ns
	text := fuzzUpdate(func(d *yjs.Doc) { d.GetText("body").Insert(0, "hello", nil) })
	meta := fuzzUpdate(func(d *yjs.Doc) { d.GetMap("meta").Set("replicationEpoch", 99) })
	aware := AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 7, Clock: 1, State: []byte(`{"user":{"name":"a"}}`)}})
	bin := func(b []byte) fuzzFrame { return fuzzFrame{data: b} }
	session := ns + "\x00s1"
	f.Add([]byte{})
	f.Add(encodeFuzzFrames(bin(authFrame(ns, "writer")), bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncStep1, []byte{0}))))
	f.Add(encodeFuzzFrames(bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncUpdate, text)), bin(authFrame(ns, "writer")))) // held, then served
	f.Add(encodeFuzzFrames(bin(authFrame(ns, "writer")), bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncStep2, text)),
		bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncUpdate, meta))))
	f.Add(encodeFuzzFrames(bin(authFrame(ns, "reader")), bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncUpdate, text))))
	f.Add(encodeFuzzFrames(bin(authFrame(session, "writer")), bin(hocuspocus.AppendAwareness(nil, session, aware)),
		bin(hocuspocus.AppendAddressed(nil, session, []byte{hocuspocus.TypeQueryAwareness})),
		bin(hocuspocus.AppendStateless(nil, session, "hi")), bin(hocuspocus.AppendClose(nil, session, ""))))
	f.Add(encodeFuzzFrames(bin(authFrame(ns, "writer")), bin(authFrame(ns, "nobody")), bin(authFrame("not-a-namespace", "writer"))))
	f.Add(encodeFuzzFrames(bin(hocuspocus.Ping), bin(hocuspocus.Pong), fuzzFrame{text: true, data: []byte("hello")}))
	f.Add(encodeFuzzFrames(bin(authFrame(ns, "writer")), bin(hocuspocus.AppendSync(nil, ns, hocuspocus.SyncUpdate, text)[:8])))
	f.Add(encodeFuzzFrames(bin([]byte{0x80}), bin([]byte{3, 'a', 'b'})))

	initialMeta := fuzzMeta(f, e)
	probes := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, e.hocusURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(64 << 20)
		defer ws.CloseNow()
		for _, fr := range decodeFuzzFrames(in) {
			typ := websocket.MessageBinary
			if fr.text {
				typ = websocket.MessageText
			}
			if ws.Write(ctx, typ, fr.data) != nil {
				break // the node closed the socket
			}
		}
		probes++
		probe := ns + "\x00probe-" + string(rune('a'+probes%26)) + time.Now().Format("150405.000000000")
		ws.Write(ctx, websocket.MessageBinary, authFrame(probe, "writer"))
		ws.Write(ctx, websocket.MessageBinary, hocuspocus.AppendSync(nil, probe, hocuspocus.SyncStep1, []byte{0}))
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				switch code := websocket.CloseStatus(err); code {
				case websocket.StatusUnsupportedData, websocket.StatusInvalidFramePayloadData,
					websocket.StatusPolicyViolation, websocket.StatusMessageTooBig, statusResetConnection:
				default:
					t.Fatalf("the socket ended with %d (%v)", code, err)
				}
				break
			}
			if fr, err := decodeNodeFrame(b); err == nil && fr.addr == probe && fr.typ == hocuspocus.TypeSync && fr.sub == hocuspocus.SyncStep2 {
				break
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")

		waitFuzz(t, "the socket's end", func() bool {
			e.srv.users.mu.Lock()
			users := len(e.srv.users.open)
			e.srv.users.mu.Unlock()
			return e.srv.Clients() == 0 && users == 0 && e.metricFor(t, "nomicore_client_connections") == 0 &&
				e.srv.Editors(ns) == 0
		})
		if n := e.metricFor(t, "nomicore_client_awareness_states"); n != 0 {
			t.Fatalf("%v awareness states outlive their socket", n)
		}
		if m := fuzzMeta(t, e); !reflect.DeepEqual(m, initialMeta) {
			t.Fatalf("meta changed: %v, was %v", m, initialMeta)
		}
		fresh, _, err := websocket.Dial(ctx, e.hocusURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.CloseNow()
		fresh.SetReadLimit(64 << 20)
		fresh.Write(ctx, websocket.MessageBinary, authFrame(ns, "writer"))
		fresh.Write(ctx, websocket.MessageBinary, hocuspocus.AppendSync(nil, ns, hocuspocus.SyncStep1, []byte{0}))
		for {
			_, b, err := fresh.Read(ctx)
			if err != nil {
				t.Fatalf("a new socket's document is not synced: %v", err)
			}
			if fr, err := decodeNodeFrame(b); err == nil && fr.addr == ns && fr.typ == hocuspocus.TypeSync && fr.sub == hocuspocus.SyncStep2 {
				break
			}
		}
		fresh.Close(websocket.StatusNormalClosure, "")
		waitFuzz(t, "the new socket's end", func() bool { return e.srv.Clients() == 0 && e.srv.Editors(ns) == 0 })
	})
}
