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
		"record size":       func(c *Config) { c.MaxUpdateBytes = MaxLogUpdateBytes + 1 },
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

// TestRecord_Batch: a batch of updates round-trips with every field; a batch of one is the
// single-record form earlier versions read; a single record reads as a batch of one.
func TestRecord_Batch(t *testing.T) {
	recs := []registry.Record{
		{Kind: registry.RecordUpdate, Epoch: 0, Token: 7, Update: []byte{1, 2, 3}},
		{Kind: registry.RecordUpdate, Epoch: 4, Token: 8, Update: bytes.Repeat([]byte{5}, 70000)},
		{Kind: registry.RecordUpdate, Epoch: 4, Token: 1 << 40, Update: nil},
	}
	b := encodeBatch(recs, "0123456789abcdef")
	if b[0] != batchVersion {
		t.Fatalf("a batch of three starts with version %d", b[0])
	}
	got, origin, err := decodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "0123456789abcdef" || len(got) != len(recs) {
		t.Fatalf("origin %q, %d records", origin, len(got))
	}
	for i, r := range recs {
		g := got[i]
		if g.Kind != r.Kind || g.Epoch != r.Epoch || g.Gen != r.Gen || g.Token != r.Token || !bytes.Equal(g.Update, r.Update) {
			t.Fatalf("record %d changed: %+v", i, g)
		}
	}
	one := encodeBatch(recs[:1], "o")
	if single := encodeRecord(recs[0], "o"); !bytes.Equal(one, single) {
		t.Fatal("a batch of one is not written as a single record")
	}
	if got, origin, err := decodeBatch(one); err != nil || len(got) != 1 || origin != "o" || got[0].Token != 7 {
		t.Fatalf("a single record read as a batch: %+v %q %v", got, origin, err)
	}
	meta := encodeRecord(registry.Record{Kind: registry.RecordMeta, Gen: 3, Epoch: 2, Update: []byte{0, 0}}, "o")
	if got, _, err := decodeBatch(meta); err != nil || len(got) != 1 || got[0].Kind != registry.RecordMeta || got[0].Gen != 3 {
		t.Fatalf("a meta record read as a batch: %+v %v", got, err)
	}
}

// TestRecord_BatchMalformed: every malformed batch is a malformed-record error, never a
// panic, and a count the input cannot hold allocates nothing.
func TestRecord_BatchMalformed(t *testing.T) {
	good := encodeBatch([]registry.Record{
		{Kind: registry.RecordUpdate, Token: 1, Update: []byte{1}},
		{Kind: registry.RecordUpdate, Token: 2, Update: []byte{2}},
	}, "abc")
	withMeta := encodeBatch([]registry.Record{
		{Kind: registry.RecordUpdate, Token: 1, Update: []byte{1}},
		{Kind: registry.RecordUpdate, Token: 2, Update: []byte{2}},
	}, "abc")
	withMeta[1+1+4] = byte(registry.RecordMeta) // the first record's kind, after count and origin
	cases := map[string][]byte{
		"empty":          nil,
		"version only":   {batchVersion},
		"count of one":   append([]byte{batchVersion, 1}, good[2:]...),
		"count too big":  append([]byte{batchVersion, 0xff, 0xff, 0x03}, good[2:]...),
		"huge count":     {batchVersion, 0xff, 0xff, 0xff, 0xff, 0x0f, 0},
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"meta in batch":  withMeta,
		"long origin":    encodeBatch([]registry.Record{{Kind: registry.RecordUpdate}, {Kind: registry.RecordUpdate}}, strings.Repeat("x", maxOriginBytes+1)),
		"unknown first":  {9, 1, 0, 0, 0, 1, 'o', 0},
	}
	for name, b := range cases {
		if _, _, err := decodeBatch(b); !errors.Is(err, errRecord) {
			t.Errorf("%s: %v, want a malformed-record error", name, err)
		}
	}
}

// FuzzDecodeBatch: the decoder never panics, and what it accepts encodes back to the same
// bytes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]registry.Record{{Kind: registry.RecordUpdate, Token: 1, Update: []byte{1}}, {Kind: registry.RecordUpdate, Epoch: 3, Token: 2}}, "o"))
	f.Add(encodeRecord(registry.Record{Kind: registry.RecordUpdate, Epoch: 1, Token: 2, Update: []byte{1}}, "o"))
	f.Add([]byte{batchVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, origin, err := decodeBatch(b)
		if err != nil {
			return
		}
		if again := encodeBatch(recs, origin); !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, encodes back to %x", b, again)
		}
	})
}
