package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/registry"
)

func TestRecord_RoundTrip(t *testing.T) {
	for _, rec := range []registry.Record{
		{Kind: registry.RecordUpdate, Epoch: 0, Token: 1, Update: []byte{1, 2, 3}},
		{Kind: registry.RecordUpdate, Epoch: 7, Token: 1 << 50, Update: bytes.Repeat([]byte{9}, 70000)},
		{Kind: registry.RecordMeta, Epoch: 3, Gen: 12, Token: 5, Update: []byte{0, 0}},
	} {
		b := encodeRecord(rec, "0123456789abcdef")
		got, origin, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("kind %d, %d bytes: %v", rec.Kind, len(rec.Update), err)
		}
		if origin != "0123456789abcdef" || got.Kind != rec.Kind || got.Epoch != rec.Epoch || got.Gen != rec.Gen ||
			got.Token != rec.Token || !bytes.Equal(got.Update, rec.Update) {
			t.Fatalf("round trip of kind %d changed it (origin %q)", rec.Kind, origin)
		}
	}
}

func TestRecord_Malformed(t *testing.T) {
	good := encodeRecord(registry.Record{Kind: registry.RecordUpdate, Epoch: 2, Token: 3, Update: []byte{1, 2}}, "abc")
	cases := map[string][]byte{
		"empty":          nil,
		"other version":  append([]byte{2}, good[1:]...),
		"unknown kind":   append([]byte{1, 9}, good[2:]...),
		"snapshot kind":  append([]byte{1, byte(registry.RecordSnapshot)}, good[2:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"long origin":    encodeRecord(registry.Record{Kind: registry.RecordUpdate}, strings.Repeat("x", maxOriginBytes+1)),
		"huge length":    {1, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, b := range cases {
		if _, _, err := decodeRecord(b); !errors.Is(err, errRecord) {
			t.Errorf("%s: %v, want a malformed-record error", name, err)
		}
	}
}

// FuzzDecodeRecord: the decoder never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(registry.Record{Kind: registry.RecordUpdate, Epoch: 1, Token: 2, Update: []byte{1}}, "o"))
	f.Add(encodeRecord(registry.Record{Kind: registry.RecordMeta, Gen: 1, Epoch: 2, Update: []byte{0, 0}}, "origin"))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, origin, err := decodeRecord(b)
		if err != nil {
			return
		}
		if again := encodeRecord(rec, origin); !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, encodes back to %x", b, again)
		}
	})
}

func TestLogSubject_OwnerIsOneToken(t *testing.T) {
	for _, owner := range []string{"default", "a.b", "x y*>", "ü/ß", strings.Repeat("o", 255)} {
		s := logSubject(owner, "ns-0123456789abcdef0123456789abcdef")
		parts := strings.Split(s, ".")
		if len(parts) != 5 || strings.ContainsAny(parts[3], " *>") {
			t.Fatalf("owner %q gives subject %q", owner, s)
		}
	}
	if logSubject("a", "ns-0") == logSubject("b", "ns-0") {
		t.Fatal("owners share a subject")
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := Config{NodeName: "n1", ClusterName: "c", ClusterListen: "127.0.0.1:4248", DataDir: "/tmp/x",
		Routes: []string{"nats://127.0.0.1:4248", "nats://127.0.0.1:4249", "nats://127.0.0.1:4250"}}
	c := ok
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.Replicas != 3 {
		t.Fatalf("default replicas %d, want 3 (three nodes named)", c.Replicas)
	}
	c = ok
	c.Routes = c.Routes[:2]
	if err := c.validate(); err != nil || c.Replicas != 2 {
		t.Fatalf("two nodes: replicas %d, %v", c.Replicas, err)
	}
	bad := map[string]func(*Config){
		"node name":         func(c *Config) { c.NodeName = "N 1" },
		"cluster name":      func(c *Config) { c.ClusterName = "a.b" },
		"listen":            func(c *Config) { c.ClusterListen = "nowhere" },
		"route scheme":      func(c *Config) { c.Routes = []string{"http://h:1"} },
		"both modes":        func(c *Config) { c.NATSURL = "nats://h:4222" },
		"replicas":          func(c *Config) { c.Replicas = 7 },
		"record size":       func(c *Config) { c.MaxRecordBytes = 80 << 20 },
		"client listen":     func(c *Config) { c.ClientListen = "x" },
		"no data directory": func(c *Config) { c.DataDir = "" },
	}
	for name, mutate := range bad {
		c := ok
		c.Routes = append([]string(nil), ok.Routes...)
		mutate(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ext := Config{NodeName: "n1", NATSURL: "nats://127.0.0.1:4222"}
	if err := ext.validate(); err != nil || ext.Replicas != 3 {
		t.Fatalf("--nats-url: replicas %d, %v", ext.Replicas, err)
	}
}
