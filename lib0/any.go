package lib0

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
)

// The lib0 "any" encoding models JavaScript values. In Go they are:
//
//	nil          JS null
//	Undefined{}  JS undefined
//	bool         JS boolean
//	float64      JS number (every number; -0, NaN and ±Inf kept)
//	BigInt       JS bigint (64-bit)
//	string       JS string
//	[]byte       Uint8Array
//	[]any        Array
//	Object       plain object, keys in JS own-property order
//
// ReadAny returns only these types. WriteAny also accepts Go integers, float32, other slices
// and string-keyed maps, converting them as a JS program would see them.

// Undefined is the JS value undefined.
type Undefined struct{}

// BigInt is a JS bigint in the signed 64-bit range lib0 encodes.
type BigInt int64

// Field is one property of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JS plain object: its properties in JS own-property order (array-index keys in
// ascending numeric order first, then the other keys in insertion order).
type Object []Field

// Get returns the value of key and whether it is present.
func (o Object) Get(key string) (any, bool) {
	for _, f := range o {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Type tags of the any encoding.
const (
	tagUndefined = 127
	tagNull      = 126
	tagInteger   = 125
	tagFloat32   = 124
	tagFloat64   = 123
	tagBigInt    = 122
	tagFalse     = 121
	tagTrue      = 120
	tagString    = 119
	tagObject    = 118
	tagArray     = 117
	tagBytes     = 116
)

// MaxAnyDepth bounds the nesting of arrays and objects in one any value.
const MaxAnyDepth = 512

// ReadAny reads one value of the any encoding.
func (d *Decoder) ReadAny() any { return d.readAny(0) }

func (d *Decoder) readAny(depth int) any {
	start := d.pos
	tag := d.ReadUint8()
	if d.err != nil {
		return nil
	}
	switch tag {
	case tagUndefined:
		return Undefined{}
	case tagNull:
		return nil
	case tagInteger:
		mag, neg := d.ReadVarIntSign()
		f := float64(mag)
		if neg {
			f = -f // -0 stays negative zero, as in JS
		}
		return f
	case tagFloat32:
		return float64(d.ReadFloat32())
	case tagFloat64:
		return d.ReadFloat64()
	case tagBigInt:
		return BigInt(d.ReadBigInt64())
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagString:
		return d.ReadVarString()
	case tagBytes:
		b := d.ReadVarUint8Array()
		if d.err != nil {
			return nil
		}
		return slices.Clone(b)
	case tagArray:
		if depth >= MaxAnyDepth {
			d.failAt(ErrTooDeep, start)
			return nil
		}
		n := d.ReadCount(math.MaxInt32, 1)
		arr := make([]any, 0, max(n, 1)) // its own backing array even when empty (JS identity)
		for i := 0; i < n && d.err == nil; i++ {
			arr = append(arr, d.readAny(depth+1))
		}
		if d.err != nil {
			return nil
		}
		return arr
	case tagObject:
		if depth >= MaxAnyDepth {
			d.failAt(ErrTooDeep, start)
			return nil
		}
		n := d.ReadCount(math.MaxInt32, 2)
		b := ObjectBuilder{fields: make(Object, 0, n)}
		for i := 0; i < n && d.err == nil; i++ {
			key := d.ReadVarString()
			val := d.readAny(depth + 1)
			b.Set(key, val)
		}
		if d.err != nil {
			return nil
		}
		return b.Object()
	default:
		d.failAt(ErrAnyTag, start)
		return nil
	}
}

// ObjectBuilder assembles an Object with the semantics of JS property assignment: a
// repeated key replaces the value in place, and array-index keys enumerate first (in
// ascending order). Assignment (obj[key] = v, as lib0 readAny does) never creates an own
// property named "__proto__"; JSON.parse does — set JSONParse for that behaviour. The zero
// value is ready to use; lookups stay linear-time only for small objects.
type ObjectBuilder struct {
	JSONParse bool

	fields Object
	index  map[string]int // built once the object grows beyond a handful of keys
}

// Set assigns key.
func (b *ObjectBuilder) Set(key string, val any) {
	if key == "__proto__" && !b.JSONParse {
		return
	}
	if i, ok := b.lookup(key); ok {
		b.fields[i].Value = val
		return
	}
	b.fields = append(b.fields, Field{Key: key, Value: val})
	if b.index != nil {
		b.index[key] = len(b.fields) - 1
	}
}

func (b *ObjectBuilder) lookup(key string) (int, bool) {
	if b.index == nil && len(b.fields) > 16 {
		b.index = make(map[string]int, 2*len(b.fields))
		for i, f := range b.fields {
			b.index[f.Key] = i
		}
	}
	if b.index != nil {
		i, ok := b.index[key]
		return i, ok
	}
	for i, f := range b.fields {
		if f.Key == key {
			return i, true
		}
	}
	return 0, false
}

// Object returns the assembled object in JS own-property order. It is never nil, and even
// an empty result has its own backing array, so two objects are never the same slice (callers
// compare JS object identity by slice data).
func (b *ObjectBuilder) Object() Object {
	if cap(b.fields) == 0 {
		return make(Object, 0, 1)
	}
	sortIndexKeysFirst(b.fields)
	return b.fields
}

// arrayIndex reports whether key is a canonical JS array index ("0" … "4294967294").
func arrayIndex(key string) (uint32, bool) {
	if key == "" || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(v), true
}

// sortIndexKeysFirst moves array-index keys to the front in ascending order, keeping the
// relative order of the other keys (JS own-property order).
func sortIndexKeysFirst(fields Object) {
	hasIndex := false
	for _, f := range fields {
		if _, ok := arrayIndex(f.Key); ok {
			hasIndex = true
			break
		}
	}
	if !hasIndex {
		return
	}
	sort.SliceStable(fields, func(i, j int) bool {
		a, aIdx := arrayIndex(fields[i].Key)
		b, bIdx := arrayIndex(fields[j].Key)
		switch {
		case aIdx && bIdx:
			return a < b
		default:
			return aIdx && !bIdx
		}
	})
}

// WriteAny writes v in the any encoding, byte-identical to JS lib0 writeAny for the same JS
// value. It returns an error for Go values that have no JS counterpart (structs, pointers,
// channels, maps with non-string keys, …) and writes nothing in that case.
func (e *Encoder) WriteAny(v any) error {
	mark := len(e.buf)
	if err := e.writeAny(v, 0); err != nil {
		e.buf = e.buf[:mark]
		return err
	}
	return nil
}

func (e *Encoder) writeAny(v any, depth int) error {
	if depth > MaxAnyDepth {
		return fmt.Errorf("lib0: any value nested deeper than %d", MaxAnyDepth)
	}
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, tagNull)
	case Undefined:
		e.buf = append(e.buf, tagUndefined)
	case bool:
		if x {
			e.buf = append(e.buf, tagTrue)
		} else {
			e.buf = append(e.buf, tagFalse)
		}
	case float64:
		e.writeNumber(x)
	case float32:
		e.writeNumber(float64(x))
	case int:
		e.writeNumber(float64(x))
	case int8:
		e.writeNumber(float64(x))
	case int16:
		e.writeNumber(float64(x))
	case int32:
		e.writeNumber(float64(x))
	case int64:
		e.writeNumber(float64(x))
	case uint:
		e.writeNumber(float64(x))
	case uint8:
		e.writeNumber(float64(x))
	case uint16:
		e.writeNumber(float64(x))
	case uint32:
		e.writeNumber(float64(x))
	case uint64:
		e.writeNumber(float64(x))
	case BigInt:
		e.buf = append(e.buf, tagBigInt)
		e.WriteBigInt64(int64(x))
	case string:
		e.buf = append(e.buf, tagString)
		e.WriteVarString(x)
	case []byte:
		e.buf = append(e.buf, tagBytes)
		e.WriteVarUint8Array(x)
	case []any:
		e.buf = append(e.buf, tagArray)
		e.WriteVarUint(uint64(len(x)))
		for _, item := range x {
			if err := e.writeAny(item, depth+1); err != nil {
				return err
			}
		}
	case Object:
		return e.writeObject(normalizeObject(x), depth)
	case map[string]any:
		return e.writeObject(objectFromMap(x), depth)
	default:
		return e.writeReflect(reflect.ValueOf(v), depth)
	}
	return nil
}

// writeNumber applies the JS writeAny number rules: an integer of magnitude ≤ 2^31−1 is a
// varInt, a value a float32 holds exactly is a float32, anything else a float64.
func (e *Encoder) writeNumber(f float64) {
	switch {
	case f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32:
		e.buf = append(e.buf, tagInteger)
		e.buf = appendVarIntMagnitude(e.buf, uint64(math.Abs(f)), math.Signbit(f))
	case float64(float32(f)) == f:
		e.buf = append(e.buf, tagFloat32)
		e.WriteFloat32(float32(f))
	default:
		e.buf = append(e.buf, tagFloat64)
		e.WriteFloat64(f)
	}
}

func (e *Encoder) writeObject(o Object, depth int) error {
	e.buf = append(e.buf, tagObject)
	e.WriteVarUint(uint64(len(o)))
	for _, f := range o {
		e.WriteVarString(f.Key)
		if err := e.writeAny(f.Value, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// normalizeObject returns o as JS would enumerate it after assigning its fields in order:
// duplicates collapse onto the first position with the last value, "__proto__" disappears,
// array-index keys come first. o itself is returned when it is already in that form.
func normalizeObject(o Object) Object {
	seen := make(map[string]struct{}, len(o))
	clean := true
	for _, f := range o {
		if _, dup := seen[f.Key]; dup || f.Key == "__proto__" {
			clean = false
			break
		}
		seen[f.Key] = struct{}{}
	}
	if clean && isIndexOrdered(o) {
		return o
	}
	b := ObjectBuilder{fields: make(Object, 0, len(o))}
	for _, f := range o {
		b.Set(f.Key, f.Value)
	}
	return b.Object()
}

func isIndexOrdered(o Object) bool {
	return sort.SliceIsSorted(o, func(i, j int) bool {
		a, aIdx := arrayIndex(o[i].Key)
		b, bIdx := arrayIndex(o[j].Key)
		if aIdx && bIdx {
			return a < b
		}
		return aIdx && !bIdx
	})
}

// objectFromMap orders a Go map as an Object: array-index keys ascending, then the other keys
// sorted (a Go map has no insertion order; sorting makes the encoding deterministic).
func objectFromMap(m map[string]any) Object {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "__proto__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	o := make(Object, 0, len(keys))
	for _, k := range keys {
		o = append(o, Field{Key: k, Value: m[k]})
	}
	sortIndexKeysFirst(o)
	return o
}

func (e *Encoder) writeReflect(rv reflect.Value, depth int) error {
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		e.buf = append(e.buf, tagArray)
		e.WriteVarUint(uint64(rv.Len()))
		for i := 0; i < rv.Len(); i++ {
			if err := e.writeAny(rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return e.writeObject(objectFromMap(m), depth)
	case reflect.String:
		return e.writeAny(rv.String(), depth)
	case reflect.Bool:
		return e.writeAny(rv.Bool(), depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.writeNumber(float64(rv.Int()))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.writeNumber(float64(rv.Uint()))
		return nil
	case reflect.Float32, reflect.Float64:
		e.writeNumber(rv.Float())
		return nil
	}
	return fmt.Errorf("lib0: cannot encode a %s as an any value", typeName(rv))
}

func typeName(rv reflect.Value) string {
	if !rv.IsValid() {
		return "invalid value"
	}
	return strconv.Quote(rv.Type().String())
}
