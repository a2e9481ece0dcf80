package persistence

import (
	"bytes"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	scope := docScope("default", "ns-1")
	key := seqKey(42)
	rec := encodeRecord(scope, key, recUpdate, []byte("payload"))
	if len(rec) != recHeader+7 || rec[0] != recMagic || rec[1] != recVersion || recKind(rec[2]) != recUpdate {
		t.Fatalf("record % x", rec)
	}
	p, err := decodeRecord(scope, key, recUpdate, rec)
	if err != nil || string(p) != "payload" {
		t.Fatalf("decode = %q, %v", p, err)
	}
	// Every single-byte change, and the same bytes under another key, scope or kind, fail.
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x01
		if _, err := decodeRecord(scope, key, recUpdate, bad); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
	if _, err := decodeRecord(scope, seqKey(43), recUpdate, rec); err == nil {
		t.Fatal("a record under another key went unnoticed")
	}
	if _, err := decodeRecord(docScope("default", "ns-2"), key, recUpdate, rec); err == nil {
		t.Fatal("a record under another namespace went unnoticed")
	}
	if _, err := decodeRecord(scope, key, recConfig, rec); err == nil {
		t.Fatal("a record of another kind went unnoticed")
	}
	for _, short := range [][]byte{nil, rec[:recHeader-1]} {
		if _, err := decodeRecord(scope, key, recUpdate, short); err == nil {
			t.Fatalf("record %x accepted", short)
		}
	}

	snap := encodeSnapshotRecord(scope, 1<<40, []byte("doc"))
	p, err = decodeRecord(scope, keySnapshot, recSnapshot, snap)
	if err != nil {
		t.Fatal(err)
	}
	through, doc, err := decodeSnapshotPayload(p)
	if err != nil || through != 1<<40 || string(doc) != "doc" {
		t.Fatalf("snapshot = %d %q %v", through, doc, err)
	}

	e := Entry{NamespaceID: "ns-1", Owner: "o", State: StateArchived, CreatedAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		Meta: map[string]string{"b": "2", "a": "1"}}
	got, err := decodeEntryPayload(appendEntryPayload(nil, e), "ns-1")
	if err != nil || got.Owner != "o" || got.State != StateArchived || !got.CreatedAt.Equal(e.CreatedAt) || len(got.Meta) != 2 || got.Meta["a"] != "1" {
		t.Fatalf("entry = %+v, %v", got, err)
	}
	reason, got, err := decodeArchivePayload(encodeArchivePayload(ReasonReset, e), "ns-1")
	if err != nil || reason != ReasonReset || got.Owner != "o" {
		t.Fatalf("archive = %v %+v %v", reason, got, err)
	}
}

// FuzzRecordDecoders: the decoders of stored records never panic, and whatever they accept
// re-encodes to the same bytes.
func FuzzRecordDecoders(f *testing.F) {
	scope := docScope("o", "ns")
	e := Entry{NamespaceID: "ns", Owner: "o", State: StateActive, CreatedAt: time.Unix(1700000000, 5).UTC(), Meta: map[string]string{"k": "v"}}
	f.Add(encodeRecord(scope, seqKey(1), recUpdate, []byte("u")))
	f.Add(encodeSnapshotRecord(scope, 7, []byte("snapshot")))
	f.Add(encodeRecord(nil, []byte("ns"), recEntry, appendEntryPayload(nil, e)))
	f.Add(encodeRecord(archiveScope("ns", 1), keyInfo, recArchive, encodeArchivePayload(ReasonArchive, e)))
	f.Add(appendEntryPayload(nil, e))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, k := range []recKind{recUpdate, recSnapshot, recEntry, recArchive, recConfig} {
			decodeRecord(scope, seqKey(1), k, b)
		}
		if through, snap, err := decodeSnapshotPayload(b); err == nil {
			if again := encodeSnapshotRecord(scope, through, snap)[recHeader:]; !bytes.Equal(again, b) {
				t.Fatalf("snapshot payload %x re-encodes as %x", b, again)
			}
		}
		if got, err := decodeEntryPayload(b, "ns"); err == nil {
			if again := appendEntryPayload(nil, got); !bytes.Equal(again, b) {
				t.Fatalf("entry payload %x re-encodes as %x", b, again)
			}
		}
		if reason, got, err := decodeArchivePayload(b, "ns"); err == nil {
			if again := encodeArchivePayload(reason, got); !bytes.Equal(again, b) {
				t.Fatalf("archive payload %x re-encodes as %x", b, again)
			}
		}
	})
}
