package hocuspocus

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// FuzzReadFrame: whatever arrives, ReadFrame returns a frame or a classified *FrameError
// (never a panic), and a frame it accepts is written back by the encoders to the same bytes
// (the frames a client sends are canonical lib0).
func FuzzReadFrame(f *testing.F) {
	if b, err := os.ReadFile("testdata/frames.json"); err == nil {
		var g struct {
			Client []struct {
				Hex string `json:"hex"`
			} `json:"client"`
		}
		if json.Unmarshal(b, &g) == nil {
			for _, c := range g.Client {
				if in, err := hex.DecodeString(c.Hex); err == nil {
					f.Add(in)
				}
			}
		}
	}
	f.Add([]byte{TypePing})
	f.Add([]byte{4, 'n', 's', '-', 'a', TypeClose})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := ReadFrame(in)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || !(errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupported)) {
				t.Fatalf("unclassified error %v", err)
			}
			if fe.HasAddress && fe.Address != fr.Address {
				t.Fatalf("error address %q, frame address %q", fe.Address, fr.Address)
			}
			return
		}
		var out []byte
		switch {
		case fr.Ping:
			out = Ping
		case fr.Pong:
			out = Pong
		case fr.Type == TypeSync:
			out = AppendSync(nil, fr.Address, fr.Sync, fr.Payload)
		case fr.Type == TypeAwareness:
			out = AppendAwareness(nil, fr.Address, fr.Payload)
		case fr.Type == TypeStateless:
			out = AppendStateless(nil, fr.Address, fr.Stateless)
		case fr.Type == TypeQueryAwareness, fr.Type == TypeClose:
			out = AppendAddressed(nil, fr.Address, []byte{byte(fr.Type)})
		default:
			return // SyncReply and auth (whose trailing fields are ignored) do not round-trip
		}
		if string(out) != string(in) {
			t.Fatalf("read %x as %+v, which writes %x", in, fr, out)
		}
	})
}
