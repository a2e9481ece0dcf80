package lib0

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
)

func decodeErr(t *testing.T, input []byte, read func(d *Decoder)) error {
	t.Helper()
	d := NewDecoder(input)
	read(d)
	return d.Err()
}

func TestVarUintStrictness(t *testing.T) {
	cases := []struct {
		name  string
		input []byte
		want  error
	}{
		{"zero continuation", []byte{0x80, 0x00}, ErrNonCanonical},
		{"127 in two bytes", []byte{0xff, 0x00}, ErrNonCanonical},
		{"three bytes ending zero", []byte{0x81, 0x80, 0x00}, ErrNonCanonical},
		{"2^53", AppendVarUint(nil, 1<<53), ErrOverflow},
		{"nine bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, ErrOverflow},
		{"empty", nil, ErrTruncated},
		{"dangling continuation", []byte{0x80}, ErrTruncated},
	}
	for _, c := range cases {
		err := decodeErr(t, c.input, func(d *Decoder) { d.ReadVarUint() })
		if !errors.Is(err, c.want) {
			t.Errorf("%s: ReadVarUint(%x) error = %v, want %v", c.name, c.input, err, c.want)
		}
	}
	if v := NewDecoder(AppendVarUint(nil, MaxSafeInteger)).ReadVarUint(); v != MaxSafeInteger {
		t.Errorf("MaxSafeInteger read back as %d", v)
	}
	err := decodeErr(t, AppendVarUint(nil, 1<<32), func(d *Decoder) { d.ReadVarUint32() })
	if !errors.Is(err, ErrOverflow) {
		t.Errorf("ReadVarUint32(2^32) error = %v", err)
	}
	d := NewDecoder(AppendVarUint(nil, math.MaxUint32))
	if v := d.ReadVarUint32(); v != math.MaxUint32 || d.Err() != nil {
		t.Errorf("ReadVarUint32(2^32-1) = %d, %v", v, d.Err())
	}
	err = decodeErr(t, AppendVarUint(nil, 1001), func(d *Decoder) { d.ReadVarUintMax(1000) })
	if !errors.Is(err, ErrOverflow) {
		t.Errorf("ReadVarUintMax(1000) of 1001 error = %v", err)
	}
}

// TestVarUintFollowed reads varUints that more input follows (ReadVarUint takes a shorter
// path when at least eight bytes remain): the values of every length read back with the
// bytes they took, and the malformed ones fail as they do at the end of the input.
func TestVarUintFollowed(t *testing.T) {
	tail := []byte{0x81, 0x01, 0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}
	for shift := 0; shift <= 53; shift++ {
		for _, v := range []uint64{1<<shift - 1, 1 << shift, 1<<shift + 1, 1<<shift | 0x55} {
			if v > MaxSafeInteger {
				continue
			}
			enc := AppendVarUint(nil, v)
			d := NewDecoder(append(enc[:len(enc):len(enc)], tail...))
			if got := d.ReadVarUint(); got != v || d.Err() != nil || d.Pos() != len(enc) {
				t.Errorf("ReadVarUint(%x + tail) = %d at %d, %v; want %d at %d", enc, got, d.Pos(), d.Err(), v, len(enc))
			}
		}
	}
	for _, c := range []struct {
		input []byte
		want  error
	}{
		{[]byte{0x80, 0x00}, ErrNonCanonical},
		{[]byte{0xff, 0x00}, ErrNonCanonical},
		{[]byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, ErrNonCanonical},
		{[]byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, ErrNonCanonical},
		{AppendVarUint(nil, 1<<53), ErrOverflow},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, ErrOverflow},
	} {
		in := append(c.input[:len(c.input):len(c.input)], tail...)
		if err := decodeErr(t, in, func(d *Decoder) { d.ReadVarUint() }); !errors.Is(err, c.want) {
			t.Errorf("ReadVarUint(%x + tail) error = %v, want %v", c.input, err, c.want)
		}
	}
}

func TestVarIntStrictness(t *testing.T) {
	for _, c := range []struct {
		input []byte
		want  error
	}{
		{[]byte{0x80, 0x00}, ErrNonCanonical},
		{[]byte{0xc0, 0x00}, ErrNonCanonical},
		{[]byte{0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrOverflow},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrOverflow}, // 2^55-1
		{[]byte{0x80}, ErrTruncated},
		{nil, ErrTruncated},
	} {
		if err := decodeErr(t, c.input, func(d *Decoder) { d.ReadVarInt() }); !errors.Is(err, c.want) {
			t.Errorf("ReadVarInt(%x) error = %v, want %v", c.input, err, c.want)
		}
	}
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 40, -(1 << 40), MaxSafeInteger, -MaxSafeInteger} {
		e := NewEncoder(0)
		e.WriteVarInt(v)
		d := NewDecoder(e.Bytes())
		if got := d.ReadVarInt(); got != v || d.Finish() != nil {
			t.Errorf("varInt %d round-trips to %d (%v)", v, got, d.Err())
		}
	}
}

func TestStringsAndBytes(t *testing.T) {
	if err := decodeErr(t, []byte{0x02, 0xc3, 0x28}, func(d *Decoder) { d.ReadVarString() }); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8 error = %v", err)
	}
	if err := decodeErr(t, []byte{0x03, 'a', 'b'}, func(d *Decoder) { d.ReadVarString() }); !errors.Is(err, ErrLength) {
		t.Errorf("short string error = %v", err)
	}
	// A string of valid UTF-8 is copied: mutating the input afterwards leaves it intact.
	in := []byte{0x02, 'h', 'i'}
	d := NewDecoder(in)
	s := d.ReadVarString()
	in[1] = 'X'
	if s != "hi" {
		t.Errorf("ReadVarString aliased its input: %q", s)
	}
	// ReadVarUint8Array aliases and is capacity-limited (appending cannot clobber the input).
	in = []byte{0x02, 1, 2, 9}
	b := NewDecoder(in).ReadVarUint8Array()
	_ = append(b, 7)
	if in[3] != 9 {
		t.Error("append to a returned slice overwrote the following input byte")
	}
}

// A huge declared length on a short body is rejected before anything is allocated.
func TestHugeLengthAllocatesNothing(t *testing.T) {
	input := AppendVarUint(nil, MaxSafeInteger)
	input = append(input, 1, 2, 3)
	allocs := testing.AllocsPerRun(100, func() {
		var d Decoder
		d.Reset(input)
		if d.ReadVarUint8Array() != nil {
			t.Fatal("returned bytes")
		}
		if !errors.Is(d.err, ErrLength) {
			t.Fatalf("error = %v", d.err)
		}
	})
	// The sticky error itself is one small allocation; nothing sized by the declared length.
	if allocs > 1 {
		t.Errorf("ReadVarUint8Array with a huge length allocated %v times", allocs)
	}
	countInput := AppendVarUint(nil, 1<<40)
	allocs = testing.AllocsPerRun(100, func() {
		var d Decoder
		d.Reset(countInput)
		if d.ReadCount(math.MaxInt32, 1) != 0 {
			t.Fatal("count returned")
		}
	})
	if allocs > 1 {
		t.Errorf("ReadCount with a huge count allocated %v times", allocs)
	}
}

func TestCounts(t *testing.T) {
	e := NewEncoder(0)
	e.WriteVarUint(5)
	e.WriteRaw([]byte{1, 2, 3, 4, 5})
	if n := NewDecoder(e.Bytes()).ReadCount(5, 1); n != 5 {
		t.Errorf("ReadCount = %d", n)
	}
	if err := decodeErr(t, e.Bytes(), func(d *Decoder) { d.ReadCount(4, 1) }); !errors.Is(err, ErrCount) {
		t.Errorf("over cap error = %v", err)
	}
	if err := decodeErr(t, e.Bytes(), func(d *Decoder) { d.ReadCount(10, 2) }); !errors.Is(err, ErrLength) {
		t.Errorf("over remaining error = %v", err)
	}
}

func TestBoolOptionalAndFinish(t *testing.T) {
	if err := decodeErr(t, []byte{2}, func(d *Decoder) { d.ReadBool() }); !errors.Is(err, ErrBool) {
		t.Errorf("bool 2 error = %v", err)
	}
	if err := decodeErr(t, []byte{2}, func(d *Decoder) { d.ReadOptional() }); !errors.Is(err, ErrOptional) {
		t.Errorf("optional 2 error = %v", err)
	}
	d := NewDecoder([]byte{1, 0, 7})
	if !d.ReadBool() || d.ReadOptional() {
		t.Error("bool/optional values wrong")
	}
	err := d.Finish()
	var le *Error
	if !errors.As(err, &le) || !errors.Is(err, ErrTrailing) || le.Offset != 2 {
		t.Errorf("Finish = %v", err)
	}
	if !strings.Contains(err.Error(), "offset 2") {
		t.Errorf("error text %q lacks the offset", err)
	}
}

func TestErrorsAreSticky(t *testing.T) {
	d := NewDecoder([]byte{0x80, 0x00, 0x05, 0x05})
	if d.ReadVarUint() != 0 {
		t.Fatal("value on failure")
	}
	first := d.Err()
	if d.ReadUint8() != 0 || d.ReadVarUint() != 0 || d.ReadVarString() != "" || d.ReadAny() != nil {
		t.Error("reads after a failure returned values")
	}
	if d.Err() != first || d.Pos() != 0 || d.Remaining() != 0 {
		t.Errorf("state changed after failure: err=%v pos=%d", d.Err(), d.Pos())
	}
	d.Fail(errors.New("later"))
	if d.Err() != first {
		t.Error("Fail replaced the first error")
	}
}

func TestAnyStrictness(t *testing.T) {
	for _, tag := range []byte{0, 1, 115, 128, 255} {
		if err := decodeErr(t, []byte{tag}, func(d *Decoder) { d.ReadAny() }); !errors.Is(err, ErrAnyTag) {
			t.Errorf("tag %d error = %v", tag, err)
		}
	}
	deep := bytes.Repeat([]byte{tagArray, 1}, MaxAnyDepth+1)
	deep = append(deep, tagNull)
	if err := decodeErr(t, deep, func(d *Decoder) { d.ReadAny() }); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep nesting error = %v", err)
	}
	ok := bytes.Repeat([]byte{tagArray, 1}, MaxAnyDepth)
	ok = append(ok, tagNull)
	if err := decodeErr(t, ok, func(d *Decoder) { d.ReadAny() }); err != nil {
		t.Errorf("nesting at the limit: %v", err)
	}
	// An array count larger than the remaining input fails before allocating.
	big := append([]byte{tagArray}, AppendVarUint(nil, 1<<30)...)
	if err := decodeErr(t, big, func(d *Decoder) { d.ReadAny() }); !errors.Is(err, ErrLength) {
		t.Errorf("huge array error = %v", err)
	}
}

func TestAnyObjectSemantics(t *testing.T) {
	e := NewEncoder(0)
	e.WriteUint8(tagObject)
	e.WriteVarUint(4)
	for _, kv := range []struct {
		k string
		v float64
	}{{"b", 1}, {"__proto__", 2}, {"7", 3}, {"b", 4}} {
		e.WriteVarString(kv.k)
		e.WriteUint8(tagInteger)
		e.WriteVarInt(int64(kv.v))
	}
	got := NewDecoder(e.Bytes()).ReadAny()
	want := Object{{"7", 3.0}, {"b", 4.0}}
	if !sameAny(got, want) {
		t.Errorf("object = %#v, want %#v", got, want)
	}
	if v, ok := want.Get("b"); !ok || v != 4.0 {
		t.Errorf("Get(b) = %v %v", v, ok)
	}
	// A map is written in JS order: index keys ascending, then the rest sorted.
	e.Reset()
	if err := e.WriteAny(map[string]any{"z": 1, "10": 2, "a": 3, "2": 4}); err != nil {
		t.Fatal(err)
	}
	got = NewDecoder(e.Bytes()).ReadAny()
	want = Object{{"2", 4.0}, {"10", 2.0}, {"a", 3.0}, {"z", 1.0}}
	if !sameAny(got, want) {
		t.Errorf("map encoded as %#v", got)
	}
}

func TestWriteAnyGoValues(t *testing.T) {
	e := NewEncoder(0)
	for _, v := range []any{int(5), int64(-7), uint32(9), float32(1.5), []string{"a"}, []int{1, 2}, map[string]int{"k": 1}} {
		e.Reset()
		if err := e.WriteAny(v); err != nil {
			t.Fatalf("WriteAny(%#v): %v", v, err)
		}
		if err := NewDecoder(e.Bytes()).Finish(); err == nil && e.Len() == 0 {
			t.Fatalf("WriteAny(%#v) wrote nothing", v)
		}
	}
	e.Reset()
	e.WriteUint8(0xaa)
	if err := e.WriteAny([]any{1, struct{}{}}); err == nil {
		t.Fatal("WriteAny accepted a struct")
	}
	if !bytes.Equal(e.Bytes(), []byte{0xaa}) {
		t.Errorf("failed WriteAny left bytes behind: %x", e.Bytes())
	}
	// Integers beyond 2^31-1 are float64 (or float32 when exact), as in JS.
	e.Reset()
	_ = e.WriteAny(int64(1) << 31)
	if e.Bytes()[0] != tagFloat32 {
		t.Errorf("2^31 encoded with tag %d", e.Bytes()[0])
	}
}

func FuzzReadAny(f *testing.F) {
	vf := loadVectors(f)
	for _, v := range vf.Vectors {
		if v.Kind == "any" {
			b, _ := hex.DecodeString(v.Hex)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		d := NewDecoder(input)
		v := d.ReadAny()
		if d.Err() != nil {
			var le *Error
			if !errors.As(d.Err(), &le) {
				t.Fatalf("unclassified error %v", d.Err())
			}
			return
		}
		e := NewEncoder(0)
		if err := e.WriteAny(v); err != nil {
			t.Fatalf("re-encoding a decoded value: %v", err)
		}
		d2 := NewDecoder(e.Bytes())
		v2 := d2.ReadAny()
		if err := d2.Finish(); err != nil {
			t.Fatalf("decoding our own encoding %x: %v", e.Bytes(), err)
		}
		if !sameAny(v, v2) {
			t.Fatalf("round trip changed %#v into %#v", v, v2)
		}
	})
}

func FuzzReadVarUint(f *testing.F) {
	for _, s := range [][]byte{{0}, {0x7f}, {0x80, 0x01}, {0xff, 0xff, 0xff, 0xff, 0x0f}, {0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3, 4, 5, 6, 7, 8}, {0x81, 0x80, 0x00, 1, 2, 3, 4, 5, 6, 7, 8}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		d := NewDecoder(input)
		v := d.ReadVarUint()
		if d.Err() != nil {
			return
		}
		// The shortest form is unique: re-encoding gives exactly the bytes consumed.
		if enc := AppendVarUint(nil, v); !bytes.Equal(enc, input[:d.Pos()]) {
			t.Fatalf("%x decoded to %d, which encodes as %x", input[:d.Pos()], v, enc)
		}
		if v > MaxSafeInteger {
			t.Fatalf("accepted %d beyond the safe range", v)
		}
	})
}

func BenchmarkReadVarUint(b *testing.B) {
	buf := AppendVarUint(nil, 1<<20)
	var d Decoder
	for b.Loop() {
		d.Reset(buf)
		d.ReadVarUint()
	}
}

func BenchmarkWriteAnyObject(b *testing.B) {
	v := Object{{"name", "nomicore"}, {"n", 42.0}, {"tags", []any{"a", "b"}}}
	e := NewEncoder(64)
	for b.Loop() {
		e.Reset()
		_ = e.WriteAny(v)
	}
}

func TestObjectBuilder(t *testing.T) {
	var assign ObjectBuilder
	assign.Set("__proto__", 1.0)
	assign.Set("x", 1.0)
	var parse ObjectBuilder
	parse.JSONParse = true
	parse.Set("__proto__", 1.0)
	if len(assign.Object()) != 1 || len(parse.Object()) != 1 || parse.Object()[0].Key != "__proto__" {
		t.Errorf("assign %v, parse %v", assign.Object(), parse.Object())
	}
	// Many keys, repeated: stays in first-insertion position with the last value.
	var big ObjectBuilder
	for i := range 100 {
		big.Set(string(rune('a'+i%26))+string(rune('a'+i/26)), float64(i))
	}
	big.Set("aa", -1.0)
	if o := big.Object(); len(o) != 100 || o[0].Key != "aa" || o[0].Value != -1.0 {
		t.Errorf("big object starts %v (len %d)", o[0], len(o))
	}
	// Distinct empty objects are distinct slices (JS identity).
	var e1, e2 ObjectBuilder
	a, b := e1.Object(), e2.Object()
	if cap(a) == 0 || &a[:1][0] == &b[:1][0] {
		t.Error("empty objects share a backing array")
	}
}
