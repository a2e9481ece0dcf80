package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/registry"
)

// A record's bytes in the log (the message payload; the log position is the stream
// sequence):
//
//	version  uint8      recordVersion
//	kind     uint8      registry.RecordKind
//	epoch    varUint    update: the epoch it was admitted under (0: a local write); meta: the epoch after it
//	gen      varUint    meta: the generation (0 for an update)
//	token    varUint    the publisher's number for it
//	origin   varString  the publishing process (its incarnation mark, 16 hex)
//	update   varUint8Array  the Yjs update
//
// Nothing follows. The message id (for the stream's de-duplication) is origin-token for
// an update, meta-<namespace>-<gen> for a meta change, so that two nodes completing the
// same meta change publish it once, and deleted-<namespace> for a deletion.
const recordVersion = 1

// maxOriginBytes bounds the origin field.
const maxOriginBytes = 64

// errRecord is the kind of every malformed-record error.
var errRecord = errors.New("cluster: malformed log record")

func encodeRecord(rec registry.Record, origin string) []byte {
	e := lib0.NewEncoder(len(rec.Update) + 48)
	e.WriteUint8(recordVersion)
	e.WriteUint8(uint8(rec.Kind))
	e.WriteVarUint(rec.Epoch)
	e.WriteVarUint(rec.Gen)
	e.WriteVarUint(rec.Token)
	e.WriteVarString(origin)
	e.WriteVarUint8Array(rec.Update)
	return e.Bytes()
}

// decodeRecord reads a record. It never panics and allocates nothing from a length it has
// not checked against the input (the update aliases b).
func decodeRecord(b []byte) (registry.Record, string, error) {
	d := lib0.NewDecoder(b)
	var rec registry.Record
	if v := d.ReadUint8(); d.Err() == nil && v != recordVersion {
		return rec, "", fmt.Errorf("%w: version %d (this node reads %d; upgrade it)", errRecord, v, recordVersion)
	}
	rec.Kind = registry.RecordKind(d.ReadUint8())
	rec.Epoch = d.ReadVarUint()
	rec.Gen = d.ReadVarUint()
	rec.Token = d.ReadVarUint()
	origin := d.ReadVarStringBytes()
	if d.Err() == nil && len(origin) > maxOriginBytes {
		return registry.Record{}, "", fmt.Errorf("%w: origin of %d bytes", errRecord, len(origin))
	}
	rec.Update = d.ReadVarUint8Array()
	if err := d.Finish(); err != nil {
		return registry.Record{}, "", fmt.Errorf("%w: %v", errRecord, err)
	}
	if rec.Kind != registry.RecordUpdate && rec.Kind != registry.RecordMeta && rec.Kind != registry.RecordDeleted {
		return registry.Record{}, "", fmt.Errorf("%w: kind %d", errRecord, rec.Kind)
	}
	return rec, string(origin), nil
}

// msgID is the de-duplication id of a record.
func msgID(ns string, rec registry.Record, origin string) string {
	switch rec.Kind {
	case registry.RecordMeta:
		return fmt.Sprintf("meta-%s-%d", ns, rec.Gen)
	case registry.RecordDeleted:
		return "deleted-" + ns
	}
	return fmt.Sprintf("%s-%d", origin, rec.Token)
}

// ownerToken encodes an owner (any UTF-8 string) as one subject token: base64url without
// padding, which uses no character NATS reserves.
func ownerToken(owner string) string { return base64.RawURLEncoding.EncodeToString([]byte(owner)) }

// logSubject is the subject of a namespace's log: the owner partition, then the id.
func logSubject(owner, ns string) string {
	return subjectRoot + ".ns." + ownerToken(owner) + "." + ns
}
