package protocol

import (
	"errors"

	"github.com/nomicore/nomicore/lib0"
)

// reader reads payload fields with lib0's strict readers (docs/protocol.md#binary-form:
// canonical varUint, bounded lengths, valid UTF-8, 0/1 bool and optional bytes) and
// remembers which field was being read when the first failure happened. Values it returns
// after a failure are zero.
type reader struct {
	lib0.Decoder
	field string
}

// at names the next field; it reports false once a read has failed.
func (r *reader) at(field string) bool {
	if r.Err() != nil {
		return false
	}
	r.field = field
	return true
}

// fail records a grammar violation of the field being read.
func (r *reader) fail(rule string) { r.Fail(errors.New(rule)) }

// uint reads a varUint that must be a JS safe integer.
func (r *reader) uint(field string) uint64 {
	if !r.at(field) {
		return 0
	}
	return r.ReadVarUint()
}

// u32 reads a varUint the contract types as uint32.
func (r *reader) u32(field string) uint32 {
	if !r.at(field) {
		return 0
	}
	return r.ReadVarUint32()
}

func (r *reader) u8(field string) uint8 {
	if !r.at(field) {
		return 0
	}
	return r.ReadUint8()
}

func (r *reader) str(field string) string {
	if !r.at(field) {
		return ""
	}
	return r.ReadVarString()
}

// bytes reads a varUint8Array, aliasing the payload.
func (r *reader) bytes(field string) []byte {
	if !r.at(field) {
		return nil
	}
	return r.ReadVarUint8Array()
}

func (r *reader) boolean(field string) bool {
	if !r.at(field) {
		return false
	}
	return r.ReadBool()
}

// optional reads an optional marker: a u8 0 or 1, followed by the value when 1.
func (r *reader) optional(field string) bool {
	if !r.at(field) {
		return false
	}
	return r.ReadOptional()
}

// caps reads a capability bitset: a fixed uint32 big-endian.
func (r *reader) caps(field string) Capability {
	if !r.at(field) {
		return 0
	}
	return Capability(r.ReadUint32BE())
}

// namespace reads a varString namespaceId and checks `^ns-[0-9a-f]{32}$` without
// allocating.
func (r *reader) namespace(field string) NamespaceID {
	if !r.at(field) {
		return NamespaceID{}
	}
	b := r.ReadVarStringBytes()
	if r.Err() != nil {
		return NamespaceID{}
	}
	id, ok := namespaceIDFromBytes(b)
	if !ok {
		r.fail("namespaceId does not match ^ns-[0-9a-f]{32}$")
	}
	return id
}

// versions reads HELLO's protocolVersions: a count of at most MaxProtocolVersions, checked
// against the remaining input before the list is allocated, then the entries.
func (r *reader) versions(field string) []uint64 {
	if !r.at(field) {
		return nil
	}
	n := r.ReadCount(MaxProtocolVersions, 1)
	if n == 0 {
		return nil
	}
	list := make([]uint64, n)
	for i := range list {
		list[i] = r.ReadVarUint()
	}
	return list
}

// nonce reads a varUint8Array that must be exactly 16 bytes.
func (r *reader) nonce(field string) (n [16]byte) {
	if !r.at(field) {
		return n
	}
	b := r.ReadVarUint8Array()
	if r.Err() != nil {
		return n
	}
	if len(b) != len(n) {
		r.fail("connectionNonce is not 16 bytes")
		return n
	}
	return [16]byte(b)
}
