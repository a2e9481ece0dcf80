package observer_test

import (
	"testing"

	o "github.com/nomicore/nomicore/observer"
)

// TestS23_3_StateVectorDigest checks the dual-lane FNV-1a-32 digest against values
// computed outside this code. The first three lanes are the published FNV-1a-32
// test vectors ("" → 811c9dc5, "a" → e40c292c, "foobar" → bf9cf968). Every full
// expected string was produced with this node one-liner (Math.imul keeps the
// multiply mod 2^32):
//
//	node -e 'const f=b=>{let h=0x811c9dc5;for(const x of b){h^=x;h=Math.imul(h,16777619)>>>0}
//	  return h.toString(16).padStart(8,"0")};const d=b=>f(b)+f([...b].reverse());
//	  console.log(d([2,145,214,177,156,15,5,1,10]))'
func TestS23_3_StateVectorDigest(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{nil, "811c9dc5811c9dc5"},
		{[]byte{}, "811c9dc5811c9dc5"},
		{[]byte("a"), "e40c292ce40c292c"},
		{[]byte{0}, "050c5d1f050c5d1f"},
		{[]byte("foobar"), "bf9cf9686f5d6112"}, // lane B hashes "raboof"
		{[]byte{2, 145, 214, 177, 156, 15, 5, 1, 10}, "ef24cbe485670ff0"},
	} {
		if got := o.StateVectorDigest(c.in); got != c.want {
			t.Errorf("StateVectorDigest(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestS23_1_SVEffectGroupIsConsistent(t *testing.T) {
	sv := []byte{2, 145, 214, 177, 156, 15, 5, 1, 10}
	same := o.NewSVEffect(sv, append([]byte(nil), sv...))
	if same.Changed() || same.ApplyEffect() != o.EffectNoop || same.BeforeHash() != same.AfterHash() ||
		same.BeforeHash() != "ef24cbe485670ff0" {
		t.Errorf("unchanged vector: changed=%v effect=%s before=%s after=%s",
			same.Changed(), same.ApplyEffect(), same.BeforeHash(), same.AfterHash())
	}
	diff := o.NewSVEffect([]byte("a"), []byte{0})
	if !diff.Changed() || diff.ApplyEffect() != o.EffectChanged ||
		diff.BeforeHash() != "e40c292ce40c292c" || diff.AfterHash() != "050c5d1f050c5d1f" {
		t.Errorf("changed vector: changed=%v effect=%s before=%s after=%s",
			diff.Changed(), diff.ApplyEffect(), diff.BeforeHash(), diff.AfterHash())
	}
}

func BenchmarkStateVectorDigest(b *testing.B) {
	sv := make([]byte, 64)
	for i := range sv {
		sv[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(sv)))
	for b.Loop() {
		_ = o.StateVectorDigest(sv)
	}
}
