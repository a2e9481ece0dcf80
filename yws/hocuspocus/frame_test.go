package hocuspocus

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// golden is testdata/frames.json, written by e2e/hocuspocus/golden.mjs from the real
// @hocuspocus/provider (3.x and 4.x) and @hocuspocus/server packages (make golden).
type golden struct {
	Provider map[string]string `json:"provider"`
	Server   string            `json:"server"`
	Client   []struct {
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		Hex       string `json:"hex"`
		Address   string `json:"address"`
		Type      string `json:"type"`
		Token     string `json:"token"`
		Version   string `json:"version"`
		Payload   string `json:"payload"`
		Stateless string `json:"stateless"`
	} `json:"client"`
	ServerFrames []struct {
		Name      string `json:"name"`
		Hex       string `json:"hex"`
		Address   string `json:"address"`
		Type      string `json:"type"`
		Scope     string `json:"scope"`
		Payload   string `json:"payload"`
		Saved     bool   `json:"saved"`
		Stateless string `json:"stateless"`
		Reason    string `json:"reason"`
	} `json:"server_frames"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile("testdata/frames.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Client) == 0 || len(g.ServerFrames) == 0 {
		t.Fatal("frames.json holds no frames")
	}
	return g
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenClientFrames reads every frame the real providers sent and checks it decodes to
// what the provider was given.
func TestGoldenClientFrames(t *testing.T) {
	g := loadGolden(t)
	seen := map[string]bool{}
	for _, c := range g.Client {
		t.Run(c.Provider+"/"+c.Name, func(t *testing.T) {
			f, err := ReadFrame(unhex(t, c.Hex))
			if err != nil {
				t.Fatal(err)
			}
			seen[c.Provider[:1]+c.Type] = true
			if f.Address != c.Address {
				t.Errorf("address %q, want %q", f.Address, c.Address)
			}
			if f.Name() != c.Type {
				t.Errorf("frame %s, want %s", f.Name(), c.Type)
			}
			switch c.Type {
			case "auth":
				if f.Token != c.Token || f.Version != c.Version {
					t.Errorf("token %q version %q, want %q %q", f.Token, f.Version, c.Token, c.Version)
				}
			case "sync-step1", "sync-step2", "update", "awareness":
				if !bytes.Equal(f.Payload, unhex(t, c.Payload)) {
					t.Errorf("payload %x, want %s", f.Payload, c.Payload)
				}
			case "stateless":
				if f.Stateless != c.Stateless {
					t.Errorf("stateless %q, want %q", f.Stateless, c.Stateless)
				}
			}
		})
	}
	for _, want := range []string{"3auth", "3sync-step1", "3sync-step2", "3update", "3awareness", "3stateless", "3close",
		"4auth", "4sync-step1", "4sync-step2", "4update", "4awareness", "4stateless", "4close", "4pong"} {
		if !seen[want] {
			t.Errorf("no golden frame of provider %s.x of type %s", want[:1], want[1:])
		}
	}
}

// TestGoldenServerFrames writes every frame @hocuspocus/server's encoder wrote and checks
// the bytes are the same.
func TestGoldenServerFrames(t *testing.T) {
	g := loadGolden(t)
	for _, s := range g.ServerFrames {
		t.Run(s.Name, func(t *testing.T) {
			var got []byte
			switch s.Type {
			case "authenticated":
				got = AppendAuthenticated(nil, s.Address, s.Scope)
			case "sync-step1":
				got = AppendSync(nil, s.Address, SyncStep1, unhex(t, s.Payload))
			case "sync-step2":
				got = AppendSync(nil, s.Address, SyncStep2, unhex(t, s.Payload))
			case "update":
				got = AppendSync(nil, s.Address, SyncUpdate, unhex(t, s.Payload))
			case "sync-status":
				got = AppendSyncStatus(nil, s.Address, s.Saved)
			case "awareness":
				got = AppendAwareness(nil, s.Address, unhex(t, s.Payload))
			case "stateless":
				got = AppendStateless(nil, s.Address, s.Stateless)
			case "token-request":
				got = AppendTokenRequest(nil, s.Address)
			case "permission-denied":
				got = AppendPermissionDenied(nil, s.Address, s.Reason)
			case "close":
				got = AppendClose(nil, s.Address, s.Reason)
			default:
				t.Fatalf("no encoder for %s", s.Type)
			}
			if want := unhex(t, s.Hex); !bytes.Equal(got, want) {
				t.Errorf("wrote %x, @hocuspocus/server writes %x", got, want)
			}
		})
	}
}

// TestReadFrameErrors: each bad frame is refused with its class, and with its address when
// the address decoded.
func TestReadFrameErrors(t *testing.T) {
	addr := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	long := make([]byte, MaxAddressBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	cases := []struct {
		name       string
		in         []byte
		kind       error
		hasAddress bool
	}{
		{"empty", nil, ErrMalformed, false},
		{"address cut short", []byte{5, 'n', 's'}, ErrMalformed, false},
		{"address not UTF-8", []byte{2, 0xff, 0xfe, 0}, ErrMalformed, false},
		{"address too long", cat([]byte{0x81, 0x04}, long), ErrMalformed, false},
		{"no type", addr("ns-a"), ErrMalformed, true},
		{"unknown type", cat(addr("ns-a"), []byte{42}), ErrUnsupported, true},
		{"sync status from a client", cat(addr("ns-a"), []byte{TypeSyncStatus, 1}), ErrUnsupported, true},
		{"broadcast stateless from a client", cat(addr("ns-a"), []byte{TypeBroadcastStateless, 0}), ErrUnsupported, true},
		{"authenticated from a client", cat(addr("ns-a"), []byte{TypeAuth, AuthAuthenticated, 0}), ErrUnsupported, true},
		{"sync sub-type 3", cat(addr("ns-a"), []byte{TypeSync, 3, 0}), ErrUnsupported, true},
		{"sync payload cut short", cat(addr("ns-a"), []byte{TypeSync, SyncUpdate, 9, 1}), ErrMalformed, true},
		{"trailing bytes", cat(addr("ns-a"), []byte{TypeQueryAwareness, 0}), ErrMalformed, true},
		{"close with a reason", cat(addr("ns-a"), []byte{TypeClose, 1, 'x'}), ErrMalformed, true},
		{"token cut short", cat(addr("ns-a"), []byte{TypeAuth, AuthToken, 4, 'a'}), ErrMalformed, true},
		{"stateless not UTF-8", cat(addr("ns-a"), []byte{TypeStateless, 1, 0xff}), ErrMalformed, true},
		{"non-canonical type", cat(addr("ns-a"), []byte{0x80, 0}), ErrMalformed, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(tc.in)
			var fe *FrameError
			if !errors.As(err, &fe) || !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want a %v", err, tc.kind)
			}
			if fe.HasAddress != tc.hasAddress || (tc.hasAddress && fe.Address != "ns-a") {
				t.Fatalf("address %v %q, want %v", fe.HasAddress, fe.Address, tc.hasAddress)
			}
		})
	}
}

func TestReadFrameSessionAddressAndPing(t *testing.T) {
	f, err := ReadFrame(AppendAddressed(nil, "ns-a\x00s1", []byte{TypeQueryAwareness}))
	if err != nil || f.Address != "ns-a\x00s1" || Document(f.Address) != "ns-a" || f.Name() != "query-awareness" {
		t.Fatalf("%+v %v", f, err)
	}
	if f, err := ReadFrame([]byte{TypePing}); err != nil || !f.Ping {
		t.Fatalf("ping: %+v %v", f, err)
	}
	if f, err := ReadFrame(Pong); err != nil || !f.Pong {
		t.Fatalf("pong: %+v %v", f, err)
	}
	// An auth frame may carry fields a later provider adds after the version.
	in := AppendAddressed(nil, "ns-a", []byte{TypeAuth, AuthToken, 1, 't', 1, '5', 7, 7})
	if f, err := ReadFrame(in); err != nil || f.Token != "t" || f.Version != "5" {
		t.Fatalf("auth with a further field: %+v %v", f, err)
	}
}
