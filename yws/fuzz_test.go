package yws

import (
	"bytes"
	"errors"
	"testing"
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
		default:
			t.Fatalf("decoded a message of type %d", m.Type)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, m, again)
		}
	})
}
