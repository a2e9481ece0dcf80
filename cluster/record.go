package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
// same meta change publish it once, and deleted-<namespace> for a deletion (deleted-… for
// one published again to complete an interrupted delete).
//
// A message may instead carry a batch: several updates of one namespace that one process
// admitted one after the other and published together (the publisher coalesces what
// waits for the same namespace while its earlier messages are in flight):
//
//	version  uint8      batchVersion
//	count    varUint    records in the batch, 2 … maxBatchRecords
//	origin   varString  the publishing process
//	then, count times:
//	kind     uint8      registry.RecordUpdate (meta changes and deletions are never batched)
//	epoch    varUint
//	gen      varUint    0
//	token    varUint
//	update   varUint8Array
//
// Its message id is origin-token of its first record. The records of a batch share one
// log position and are applied in their order, in one step, by every node. A batch of one
// is written as a single record (recordVersion), the form earlier versions wrote and read.
const (
	recordVersion = 1
	batchVersion  = 2
)

// maxBatchRecords bounds the records of one batch; batchRecordOverhead bounds the bytes of
// one record of a batch around its update.
const (
	maxBatchRecords     = 1024
	batchRecordOverhead = 40
)

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

// encodeBatch writes records of one origin as one message: a single record as such, two
// or more as a batch (every one an update).
func encodeBatch(recs []registry.Record, origin string) []byte {
	if len(recs) == 1 {
		return encodeRecord(recs[0], origin)
	}
	n := 2 + len(origin) + 10
	for _, r := range recs {
		n += len(r.Update) + batchRecordOverhead
	}
	e := lib0.NewEncoder(n)
	e.WriteUint8(batchVersion)
	e.WriteVarUint(uint64(len(recs)))
	e.WriteVarString(origin)
	for _, r := range recs {
		e.WriteUint8(uint8(r.Kind))
		e.WriteVarUint(r.Epoch)
		e.WriteVarUint(r.Gen)
		e.WriteVarUint(r.Token)
		e.WriteVarUint8Array(r.Update)
	}
	return e.Bytes()
}

// decodeBatch reads a message of the log: a single record or a batch. Like decodeRecord it
// never panics, and it allocates for no more records than the input can hold (each takes
// at least 5 bytes). The updates alias b.
func decodeBatch(b []byte) ([]registry.Record, string, error) {
	if len(b) > 0 && b[0] != batchVersion {
		rec, origin, err := decodeRecord(b)
		if err != nil {
			return nil, "", err
		}
		return []registry.Record{rec}, origin, nil
	}
	d := lib0.NewDecoder(b)
	d.ReadUint8()
	count := d.ReadVarUint()
	origin := d.ReadVarStringBytes()
	switch {
	case d.Err() != nil:
		return nil, "", fmt.Errorf("%w: %v", errRecord, d.Err())
	case count < 2 || count > maxBatchRecords || count > uint64(d.Remaining()/5):
		return nil, "", fmt.Errorf("%w: a batch of %d records in %d bytes", errRecord, count, len(b))
	case len(origin) > maxOriginBytes:
		return nil, "", fmt.Errorf("%w: origin of %d bytes", errRecord, len(origin))
	}
	recs := make([]registry.Record, count)
	for i := range recs {
		r := &recs[i]
		r.Kind = registry.RecordKind(d.ReadUint8())
		r.Epoch = d.ReadVarUint()
		r.Gen = d.ReadVarUint()
		r.Token = d.ReadVarUint()
		r.Update = d.ReadVarUint8Array()
		if d.Err() == nil && (r.Kind != registry.RecordUpdate || r.Gen != 0) {
			return nil, "", fmt.Errorf("%w: a batch holds a record of kind %d", errRecord, r.Kind)
		}
	}
	if err := d.Finish(); err != nil {
		return nil, "", fmt.Errorf("%w: %v", errRecord, err)
	}
	return recs, string(origin), nil
}

// msgID is the de-duplication id of a record, and of a batch (its first record's).
func msgID(ns string, rec registry.Record, origin string) string {
	switch rec.Kind {
	case registry.RecordMeta:
		return fmt.Sprintf("meta-%s-%d", ns, rec.Gen)
	case registry.RecordDeleted:
		return deletedIDPrefix + ns
	}
	return fmt.Sprintf("%s-%d", origin, rec.Token)
}

// deletedIDPrefix starts the message id of every deletion record (and of no other record:
// an update's starts with its origin, 16 hex digits). The change feed, which reads the
// records' headers only, tells a deletion by it.
const deletedIDPrefix = "deleted-"

// isDeletion reports whether a log message, by its headers, is a deletion record.
func isDeletion(h nats.Header) bool {
	return strings.HasPrefix(h.Get(jetstream.MsgIDHeader), deletedIDPrefix)
}

// ownerToken encodes an owner (any UTF-8 string) as one subject token: base64url without
// padding, which uses no character NATS reserves.
func ownerToken(owner string) string { return base64.RawURLEncoding.EncodeToString([]byte(owner)) }

// logSubject is the subject of a namespace's log: the owner partition, then the id.
func logSubject(owner, ns string) string {
	return subjectRoot + ".ns." + ownerToken(owner) + "." + ns
}
