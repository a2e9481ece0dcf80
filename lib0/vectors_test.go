package lib0

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"testing"
)

// vectorFile is lib0/testdata/vectors.json, written by the independent JS generator
// lib0/testdata/gen-vectors.mjs against the JavaScript lib0 package.
type vectorFile struct {
	Lib0    string `json:"lib0"`
	Vectors []struct {
		Kind    string          `json:"kind"`
		Value   json.RawMessage `json:"value"`
		Decoded json.RawMessage `json:"decoded"` // JS enumeration order, when it differs from value
		Hex     string          `json:"hex"`
	} `json:"vectors"`
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Vectors) < 50 {
		t.Fatalf("only %d vectors", len(vf.Vectors))
	}
	return vf
}

// fromTagged turns the generator's tagged JSON form of a JS value into our Go model.
func fromTagged(t testing.TB, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return taggedToGo(t, v)
}

func taggedToGo(t testing.TB, v any) any {
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = taggedToGo(t, item)
		}
		return out
	case map[string]any:
		switch {
		case x["$undefined"] != nil:
			return Undefined{}
		case x["$bigint"] != nil:
			n, err := strconv.ParseInt(x["$bigint"].(string), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return BigInt(n)
		case x["$number"] != nil:
			switch x["$number"] {
			case "NaN":
				return math.NaN()
			case "Infinity":
				return math.Inf(1)
			case "-Infinity":
				return math.Inf(-1)
			case "-0":
				return math.Copysign(0, -1)
			}
		case x["$bytes"] != nil:
			b, err := hex.DecodeString(x["$bytes"].(string))
			if err != nil {
				t.Fatal(err)
			}
			return b
		case x["$object"] != nil:
			var o Object
			for _, p := range x["$object"].([]any) {
				pair := p.([]any)
				o = append(o, Field{Key: pair[0].(string), Value: taggedToGo(t, pair[1])})
			}
			if o == nil {
				o = Object{}
			}
			return o
		}
	}
	t.Fatalf("unrecognised tagged value %#v", v)
	return nil
}

// sameAny compares two any values exactly: NaN equals NaN, -0 differs from 0.
func sameAny(a, b any) bool {
	fa, aok := a.(float64)
	fb, bok := b.(float64)
	if aok && bok {
		return math.Float64bits(fa) == math.Float64bits(fb) || (math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameAny(x[i], y[i]) {
				return false
			}
		}
		return true
	case Object:
		y, ok := b.(Object)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !sameAny(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestVectorsFromJSLib0(t *testing.T) {
	vf := loadVectors(t)
	for i, v := range vf.Vectors {
		t.Run(fmt.Sprintf("%d_%s", i, v.Kind), func(t *testing.T) {
			want, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			value := fromTagged(t, v.Value)
			enc := NewEncoder(0)
			var got any
			d := NewDecoder(want)
			switch v.Kind {
			case "varUint":
				enc.WriteVarUint(uint64(value.(float64)))
				got = float64(d.ReadVarUint())
			case "varInt":
				f := value.(float64)
				enc.WriteVarInt(int64(f))
				got = float64(d.ReadVarInt())
				if mag, neg := NewDecoder(want).ReadVarIntSign(); float64(mag) != math.Abs(f) || neg != math.Signbit(f) {
					t.Errorf("ReadVarIntSign = %d, %v; want %v", mag, neg, f)
				}
				if math.Signbit(f) && f == 0 { // -0: WriteVarInt(int64) cannot say it; ReadAny keeps it
					enc.Reset()
					enc.buf = appendVarIntMagnitude(enc.buf, 0, true)
					value = 0.0
				}
			case "varString":
				enc.WriteVarString(value.(string))
				got = d.ReadVarString()
			case "varUint8Array":
				b, _ := hex.DecodeString(value.(string))
				enc.WriteVarUint8Array(b)
				got = hex.EncodeToString(d.ReadVarUint8Array())
			case "uint32BE":
				enc.WriteUint32BE(uint32(value.(float64)))
				got = float64(d.ReadUint32BE())
			case "float32":
				value = float64(float32(value.(float64))) // the generator lists the JS number it rounded
				enc.WriteFloat32(float32(value.(float64)))
				got = float64(d.ReadFloat32())
			case "float64":
				enc.WriteFloat64(value.(float64))
				got = d.ReadFloat64()
			case "bigint64":
				n, _ := strconv.ParseInt(value.(string), 10, 64)
				enc.WriteBigInt64(n)
				got = strconv.FormatInt(d.ReadBigInt64(), 10)
			case "any":
				if err := enc.WriteAny(value); err != nil {
					t.Fatal(err)
				}
				got = d.ReadAny()
				if v.Decoded != nil {
					value = fromTagged(t, v.Decoded)
				}
			default:
				t.Fatalf("unknown kind %q", v.Kind)
			}
			if err := d.Finish(); err != nil {
				t.Fatalf("decode %s: %v", v.Hex, err)
			}
			if h := hex.EncodeToString(enc.Bytes()); h != v.Hex {
				t.Errorf("encode %s = %s, want %s", v.Value, h, v.Hex)
			}
			if !sameAny(got, value) {
				t.Errorf("decode %s = %#v, want %#v", v.Hex, got, value)
			}
		})
	}
}

// Every proper prefix of every vector fails to decode, and never panics.
func TestVectorsTruncatedAtEveryOffset(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.Vectors {
		full, _ := hex.DecodeString(v.Hex)
		for n := 0; n < len(full); n++ {
			d := NewDecoder(full[:n])
			switch v.Kind {
			case "varUint":
				d.ReadVarUint()
			case "varInt":
				d.ReadVarInt()
			case "varString":
				d.ReadVarString()
			case "varUint8Array":
				d.ReadVarUint8Array()
			case "uint32BE":
				d.ReadUint32BE()
			case "float32":
				d.ReadFloat32()
			case "float64", "bigint64":
				d.ReadFloat64()
			case "any":
				d.ReadAny()
			}
			if d.Err() == nil {
				t.Errorf("%s %s truncated to %d bytes decoded without error", v.Kind, v.Hex, n)
			}
		}
	}
}
