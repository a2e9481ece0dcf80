package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"time"

	"github.com/nomicore/nomicore/lib0"
)

// On-disk records. Every value the bbolt store writes is
//
//	magic(1) = 0xC5 | version(1) = 1 | kind(1) | crc32c(4, big endian) | payload
//
// where the CRC-32C (Castagnoli) covers the record's scope (the names of the buckets that
// identify it: owner and namespace for document records, namespace and archive id for an
// archive's info), its bbolt key, the kind byte and the payload. A damaged value, a damaged
// key or bucket name, or a value under the wrong key is detected when read.
const (
	recMagic   byte = 0xC5
	recVersion byte = 1
	recHeader       = 7
)

// recKind says what a record holds.
type recKind byte

const (
	recFormat   recKind = 1 // meta/format: the store's format marker
	recEntry    recKind = 2 // entries/<ns>: a registry entry
	recSnapshot recKind = 3 // …/<ns>/snapshot: through + snapshot bytes
	recUpdate   recKind = 4 // …/log/<seq>: one update
	recArchive  recKind = 5 // archives/<ns>/<id>/info: reason + entry
	recConfig   recKind = 6 // config/<key>: a value
)

func (k recKind) String() string {
	switch k {
	case recFormat:
		return "format"
	case recEntry:
		return "entry"
	case recSnapshot:
		return "snapshot"
	case recUpdate:
		return "update"
	case recArchive:
		return "archive"
	case recConfig:
		return "config"
	case recChange:
		return "change"
	case recChangeLatest:
		return "latest change"
	case recVersionInfo:
		return "version"
	case recVersionState:
		return "version state"
	}
	return fmt.Sprintf("recKind(%d)", byte(k))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordCRC(scope, key []byte, kind recKind, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, scope)
	c = crc32.Update(c, castagnoli, key)
	c = crc32.Update(c, castagnoli, []byte{byte(kind)})
	return crc32.Update(c, castagnoli, payload)
}

// encodeRecord returns the record of payload stored under key in scope.
func encodeRecord(scope, key []byte, kind recKind, payload []byte) []byte {
	out := make([]byte, 0, recHeader+len(payload))
	out = append(out, recMagic, recVersion, byte(kind))
	out = binary.BigEndian.AppendUint32(out, recordCRC(scope, key, kind, payload))
	return append(out, payload...)
}

// docScope is the scope of the records of a document (and of its archived copy).
func docScope(owner, ns string) []byte {
	return lib0.AppendVarString(lib0.AppendVarString(nil, owner), ns)
}

// archiveScope is the scope of an archive's info record.
func archiveScope(ns string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(lib0.AppendVarString(nil, ns), id)
}

// errRecord is the reason a record is rejected; wrapped into a CorruptError by the caller.
type errRecord string

func (e errRecord) Error() string { return string(e) }

// decodeRecord checks the record v stored under key in scope and returns its payload
// (aliasing v).
func decodeRecord(scope, key []byte, kind recKind, v []byte) ([]byte, error) {
	switch {
	case v == nil:
		return nil, errRecord("missing " + kind.String() + " record")
	case len(v) < recHeader:
		return nil, errRecord(fmt.Sprintf("%s record of %d bytes is shorter than its header", kind, len(v)))
	case v[0] != recMagic:
		return nil, errRecord(fmt.Sprintf("bad record magic 0x%02x", v[0]))
	case v[1] != recVersion:
		return nil, errRecord(fmt.Sprintf("unsupported record version %d", v[1]))
	case recKind(v[2]) != kind:
		return nil, errRecord(fmt.Sprintf("record kind %v, want %v", recKind(v[2]), kind))
	}
	payload := v[recHeader:]
	if got, want := binary.BigEndian.Uint32(v[3:]), recordCRC(scope, key, kind, payload); got != want {
		return nil, errRecord(fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", got, want))
	}
	return payload, nil
}

// ---- payloads ----

// maxMeta bounds the Meta map of an entry when decoding.
const maxMeta = 1024

func appendEntryPayload(dst []byte, e Entry) []byte {
	enc := lib0.NewEncoder(64)
	enc.WriteRaw(dst)
	enc.WriteVarString(e.Owner)
	enc.WriteUint8(byte(e.State))
	enc.WriteVarInt(e.CreatedAt.Unix())
	enc.WriteVarUint(uint64(e.CreatedAt.Nanosecond()))
	enc.WriteVarUint(uint64(len(e.Meta)))
	for _, k := range sortedKeys(e.Meta) {
		enc.WriteVarString(k)
		enc.WriteVarString(e.Meta[k])
	}
	// Name and labels follow only when there are some, so an entry without them keeps the
	// bytes (and the checksum) it had before names existed.
	if e.Name != "" || len(e.Labels) > 0 {
		enc.WriteVarString(e.Name)
		enc.WriteVarUint(uint64(len(e.Labels)))
		for _, k := range sortedKeys(e.Labels) {
			enc.WriteVarString(k)
			enc.WriteVarString(e.Labels[k])
		}
	}
	return enc.Bytes()
}

// readEntryPayload reads an entry, which ends its record: name and labels are read when bytes
// remain.
func readEntryPayload(d *lib0.Decoder, ns string) Entry {
	e := Entry{NamespaceID: ns}
	e.Owner = d.ReadVarString()
	e.State = State(d.ReadUint8())
	sec := d.ReadVarInt()
	nsec := d.ReadVarUint()
	n := d.ReadCount(maxMeta, 2)
	if n > 0 {
		e.Meta = make(map[string]string, n)
		for range n {
			k := d.ReadVarString()
			e.Meta[k] = d.ReadVarString()
		}
	}
	if d.Remaining() > 0 {
		e.Name = d.ReadVarString()
		if n := d.ReadCount(MaxLabels, 2); n > 0 {
			e.Labels = make(map[string]string, n)
			for range n {
				k := d.ReadVarString()
				e.Labels[k] = d.ReadVarString()
			}
		}
	}
	if d.Err() != nil {
		return Entry{}
	}
	switch {
	case e.State != StateActive && e.State != StateArchived && e.State != StateDeleted:
		d.Fail(fmt.Errorf("entry state %d", e.State))
	case nsec >= 1e9:
		d.Fail(fmt.Errorf("entry time nanoseconds %d", nsec))
	case e.Owner == "":
		d.Fail(errors.New("entry without owner"))
	}
	e.CreatedAt = time.Unix(sec, int64(nsec)).UTC()
	return e
}

// errNonCanonical: a payload that decodes but is not what its value encodes to (unsorted or
// repeated meta keys, a negative zero): not something this store wrote.
var errNonCanonical = errors.New("non-canonical encoding")

func decodeEntryPayload(p []byte, ns string) (Entry, error) {
	d := lib0.NewDecoder(p)
	e := readEntryPayload(d, ns)
	if err := d.Finish(); err != nil {
		return Entry{}, err
	}
	if !bytes.Equal(appendEntryPayload(nil, e), p) {
		return Entry{}, errNonCanonical
	}
	return e, nil
}

func encodeArchivePayload(reason ArchiveReason, e Entry) []byte {
	return appendEntryPayload([]byte{byte(reason)}, e)
}

func decodeArchivePayload(p []byte, ns string) (ArchiveReason, Entry, error) {
	d := lib0.NewDecoder(p)
	reason := ArchiveReason(d.ReadUint8())
	e := readEntryPayload(d, ns)
	if err := d.Finish(); err != nil {
		return 0, Entry{}, err
	}
	if reason != ReasonArchive && reason != ReasonReset && reason != ReasonDelete {
		return 0, Entry{}, fmt.Errorf("archive reason %d", reason)
	}
	if !bytes.Equal(encodeArchivePayload(reason, e), p) {
		return 0, Entry{}, errNonCanonical
	}
	return reason, e, nil
}

func encodeSnapshotRecord(scope []byte, through uint64, snapshot []byte) []byte {
	out := make([]byte, 0, recHeader+lib0.VarUintLen(through)+len(snapshot))
	out = append(out, recMagic, recVersion, byte(recSnapshot), 0, 0, 0, 0)
	out = lib0.AppendVarUint(out, through)
	out = append(out, snapshot...)
	binary.BigEndian.PutUint32(out[3:], recordCRC(scope, keySnapshot, recSnapshot, out[recHeader:]))
	return out
}

// decodeSnapshotPayload returns the through position and the snapshot (aliasing p).
func decodeSnapshotPayload(p []byte) (uint64, []byte, error) {
	d := lib0.NewDecoder(p)
	through := d.ReadVarUint()
	if err := d.Err(); err != nil {
		return 0, nil, err
	}
	return through, p[d.Pos():], nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
