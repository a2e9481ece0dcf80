package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/nomicore/nomicore/lib0"
)

// Payloads of the change feed's and the versions' records (record.go has the framing).
//
//	change:        kind(1) | at (ms, varUint) | owner (varString) | ns (varString) | state vector (varUint8Array)
//	latest change: cursor (varUint) | change
//	version info:  kind(1) | createdAt (ms, varUint) | label (varString) | state vector (varUint8Array) | state bytes (varUint)
//	version state: the encoded state
const (
	recChange       recKind = 7  // changes/<cursor>
	recChangeLatest recKind = 8  // changes-latest/<ns>
	recVersionInfo  recKind = 9  // versions/<ns>/info/<id>
	recVersionState recKind = 10 // versions/<ns>/state/<id>
)

func appendChangePayload(dst []byte, c Change) []byte {
	enc := lib0.NewEncoder(32 + len(c.StateVector))
	enc.WriteRaw(dst)
	enc.WriteUint8(byte(c.Kind))
	enc.WriteVarUint(uint64(c.At.UnixMilli()))
	enc.WriteVarString(c.Owner)
	enc.WriteVarString(c.NamespaceID)
	enc.WriteVarUint8Array(c.StateVector)
	return enc.Bytes()
}

func readChangePayload(d *lib0.Decoder) Change {
	var c Change
	c.Kind = ChangeKind(d.ReadUint8())
	at := d.ReadVarUint()
	c.Owner = d.ReadVarString()
	c.NamespaceID = d.ReadVarString()
	if sv := d.ReadVarUint8Array(); len(sv) > 0 {
		c.StateVector = bytes.Clone(sv)
	}
	if d.Err() != nil {
		return Change{}
	}
	switch {
	case c.Kind < ChangeCreated || c.Kind > ChangeDeleted:
		d.Fail(fmt.Errorf("change kind %d", c.Kind))
	case c.Owner == "" || c.NamespaceID == "":
		d.Fail(errors.New("change without owner or namespace"))
	case at > 1<<53:
		d.Fail(fmt.Errorf("change time %d", at))
	}
	c.At = time.UnixMilli(int64(at)).UTC()
	return c
}

func decodeChangePayload(p []byte, cursor uint64) (Change, error) {
	d := lib0.NewDecoder(p)
	c := readChangePayload(d)
	if err := d.Finish(); err != nil {
		return Change{}, err
	}
	c.Cursor = cursor
	return c, nil
}

func encodeLatestPayload(c Change) []byte {
	return appendChangePayload(lib0.AppendVarUint(nil, c.Cursor), c)
}

func decodeLatestPayload(p []byte) (Change, error) {
	d := lib0.NewDecoder(p)
	cursor := d.ReadVarUint()
	c := readChangePayload(d)
	if err := d.Finish(); err != nil {
		return Change{}, err
	}
	c.Cursor = cursor
	return c, nil
}

func encodeVersionPayload(v Version) []byte {
	enc := lib0.NewEncoder(32 + len(v.Label) + len(v.StateVector))
	enc.WriteUint8(byte(v.Kind))
	enc.WriteVarUint(uint64(v.CreatedAt.UnixMilli()))
	enc.WriteVarString(v.Label)
	enc.WriteVarUint8Array(v.StateVector)
	enc.WriteVarUint(uint64(v.StateBytes))
	return enc.Bytes()
}

func decodeVersionPayload(p []byte, ns string, id uint64) (Version, error) {
	d := lib0.NewDecoder(p)
	v := Version{NamespaceID: ns, ID: id}
	v.Kind = VersionKind(d.ReadUint8())
	at := d.ReadVarUint()
	v.Label = d.ReadVarString()
	if sv := d.ReadVarUint8Array(); len(sv) > 0 {
		v.StateVector = bytes.Clone(sv)
	}
	n := d.ReadVarUint()
	if err := d.Finish(); err != nil {
		return Version{}, err
	}
	switch {
	case v.Kind < VersionManual || v.Kind > VersionBeforeRestore:
		return Version{}, fmt.Errorf("version kind %d", v.Kind)
	case at > 1<<53, n > 1<<40:
		return Version{}, fmt.Errorf("version time %d or size %d", at, n)
	}
	v.CreatedAt = time.UnixMilli(int64(at)).UTC()
	v.StateBytes = int(n)
	return v, nil
}
