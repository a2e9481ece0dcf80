package observer

import "bytes"

const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// StateVectorDigest is the documented safe digest (docs/protocol.md#safe-fields)
// over the raw encoded state-vector bytes: dual-lane FNV-1a-32 — lane A hashes
// the bytes first to last, lane B last to first, each starting from the offset
// basis 2166136261 and multiplying by 16777619 modulo 2^32 — rendered as 16
// lowercase hex digits, lane A's 8 then lane B's 8. The raw bytes never enter an
// event; only this fixed-length string does.
func StateVectorDigest(sv []byte) string {
	var a, b uint32 = fnvOffset32, fnvOffset32
	for i := range sv {
		a = (a ^ uint32(sv[i])) * fnvPrime32
		b = (b ^ uint32(sv[len(sv)-1-i])) * fnvPrime32
	}
	var out [16]byte
	putHex32(out[:8], a)
	putHex32(out[8:], b)
	return string(out[:])
}

func putHex32(dst []byte, v uint32) {
	const digits = "0123456789abcdef"
	for i := 7; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}

// validDigest reports whether s has the grammar of a state-vector digest: exactly
// 16 lowercase hex digits.
func validDigest(s string) bool { return len(s) == 16 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// SVEffect is the effect group of sync-diff-applied: stateVectorChanged,
// applyEffect, stateVectorBeforeHash and stateVectorAfterHash. The group is
// present or absent as a whole: a layer that captured both state vectors builds
// it with NewSVEffect; if either capture failed it leaves the event's Effect
// absent. Its fields are consistent by construction.
type SVEffect struct {
	changed       bool
	before, after string
}

// NewSVEffect builds the effect group from the state vector captured when the
// Step2 frame was accepted (before) and the one captured when the apply settled
// (after). stateVectorChanged is whether the encoded vectors differ.
func NewSVEffect(before, after []byte) SVEffect {
	return SVEffect{
		changed: !bytes.Equal(before, after),
		before:  StateVectorDigest(before),
		after:   StateVectorDigest(after),
	}
}

// Changed is stateVectorChanged.
func (e SVEffect) Changed() bool { return e.changed }

// ApplyEffect is `changed` exactly when Changed, else `noop`.
func (e SVEffect) ApplyEffect() ApplyEffect {
	if e.changed {
		return EffectChanged
	}
	return EffectNoop
}

// BeforeHash is stateVectorBeforeHash.
func (e SVEffect) BeforeHash() string { return e.before }

// AfterHash is stateVectorAfterHash.
func (e SVEffect) AfterHash() string { return e.after }
