package yjs

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/nomicore/nomicore/lib0"
)

// The vectors in testdata/vectors.json come from the JavaScript yjs reference
// (testdata/gen/gen.mjs); these tests replay them and demand the same bytes.

type vectorFile struct {
	Yjs    string
	Local  []localVector
	Remote []remoteVector
	Fns    []fnVector `json:"updateFunctions"`
}

type localVector struct {
	Name        string
	Client      uint32
	GC          bool
	Roots       map[string]string
	Script      []json.RawMessage
	Updates     []string
	State       string
	StateVector string
	JSON        json.RawMessage
}

type remoteVector struct {
	Name    string
	GC      bool
	Roots   map[string]string
	Updates []string
	Order   []int
	After   []struct {
		Pending     bool
		StateVector string
	}
	State       string
	StateVector string
	JSON        json.RawMessage
	DiffAgainst string
	Diff        string
}

type fnVector struct {
	Name           string
	Updates        []string
	Merged         string
	SVFromMerged   string
	SVFromEach     []string
	DiffSV         string
	DiffOfMerged   string
	MergedReversed string
}

func loadVectors(t testing.TB) *vectorFile {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func defineRoots(t testing.TB, d *Doc, roots map[string]string) {
	t.Helper()
	for name, kind := range roots {
		if _, err := d.Get(name, kindByName(kind)); err != nil {
			t.Fatal(err)
		}
	}
}

func kindByName(s string) Kind {
	switch s {
	case "map":
		return KindMap
	case "array":
		return KindArray
	case "text":
		return KindText
	case "xml":
		return KindXmlFragment
	}
	return KindUnknown
}

// scriptValue turns a script value (JSON in JS property order) into an application value.
func scriptValue(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = scriptValue(e)
		}
		return out
	case lib0.Object:
		if len(x) == 1 {
			switch x[0].Key {
			case "$map":
				m := NewMap()
				for _, f := range x[0].Value.(lib0.Object) {
					if err := m.Set(f.Key, scriptValue(f.Value)); err != nil {
						panic(err)
					}
				}
				return m
			case "$array":
				return NewArray(scriptValue(x[0].Value).([]any)...)
			case "$text":
				return NewText(x[0].Value.(string))
			case "$bytes":
				b, _ := hex.DecodeString(x[0].Value.(string))
				return b
			}
		}
		out := make(lib0.Object, len(x))
		for i, f := range x {
			out[i] = lib0.Field{Key: f.Key, Value: scriptValue(f.Value)}
		}
		return out
	}
	return v
}

func scriptAttrs(v any) Attrs {
	o, ok := v.(lib0.Object)
	if !ok {
		return nil
	}
	a := Attrs{}
	for _, f := range o {
		a[f.Key] = f.Value
	}
	return a
}

// runScript applies one op of the vector scripts with the Go API.
func runScript(t testing.TB, d *Doc, raw json.RawMessage) {
	t.Helper()
	v, err := parseJSON(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	op := v.([]any)
	root, _ := op[1].(string)
	num := func(i int) int { return int(op[i].(float64)) }
	opt := func(i int) any {
		if i < len(op) {
			return op[i]
		}
		return nil
	}
	switch op[0].(string) {
	case "tx":
		d.Transact(nil, func(*Transaction) {
			for _, o := range op[1].([]any) {
				b, _ := json.Marshal(jsonValue(o))
				runScript(t, d, b)
			}
		})
		return
	case "insert":
		err = d.GetText(root).Insert(num(2), op[3].(string), scriptAttrs(opt(4)))
	case "delete":
		err = d.GetText(root).Delete(num(2), num(3))
	case "format":
		err = d.GetText(root).Format(num(2), num(3), scriptAttrs(op[4]))
	case "embed":
		err = d.GetText(root).InsertEmbed(num(2), op[3], scriptAttrs(opt(4)))
	case "set":
		err = d.GetMap(root).Set(op[2].(string), scriptValue(op[3]))
	case "mdel":
		err = d.GetMap(root).Delete(op[2].(string))
	case "ains":
		err = d.GetArray(root).Insert(num(2), scriptValue(op[3]).([]any)...)
	case "apush":
		err = d.GetArray(root).Push(scriptValue(op[2]).([]any)...)
	case "adel":
		err = d.GetArray(root).Delete(num(2), num(3))
	default:
		t.Fatalf("unknown op %v", op[0])
	}
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

func assertJSON(t *testing.T, d *Doc, want json.RawMessage) {
	t.Helper()
	got, err := json.Marshal(d.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("json:\n got %s\nwant %s", gb, wb)
	}
}

func assertHex(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if h := hex.EncodeToString(got); h != want {
		t.Errorf("%s:\n got %s\nwant %s", what, h, want)
	}
}

func TestVectorsLocalScripts(t *testing.T) {
	for _, lv := range loadVectors(t).Local {
		t.Run(lv.Name, func(t *testing.T) {
			d := NewDoc(WithClientID(lv.Client), WithGC(lv.GC))
			defineRoots(t, d, lv.Roots)
			var updates [][]byte
			d.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
			for _, op := range lv.Script {
				runScript(t, d, op)
			}
			if len(updates) != len(lv.Updates) {
				t.Fatalf("%d updates, want %d", len(updates), len(lv.Updates))
			}
			for i, u := range updates {
				assertHex(t, "update "+itoa(i), u, lv.Updates[i])
			}
			st, err := EncodeStateAsUpdate(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "state", st, lv.State)
			assertHex(t, "state vector", d.EncodeStateVector(), lv.StateVector)
			assertJSON(t, d, lv.JSON)
		})
	}
}

func TestVectorsRemoteHistories(t *testing.T) {
	for _, rv := range loadVectors(t).Remote {
		t.Run(rv.Name, func(t *testing.T) {
			d := NewDoc(WithClientID(999), WithGC(rv.GC))
			defineRoots(t, d, rv.Roots)
			for k, i := range rv.Order {
				if err := ApplyUpdate(d, unhex(t, rv.Updates[i]), nil); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
				if d.HasPending() != rv.After[k].Pending {
					t.Errorf("after update %d: pending %v, want %v", i, d.HasPending(), rv.After[k].Pending)
				}
				assertHex(t, "state vector after update "+itoa(i), d.EncodeStateVector(), rv.After[k].StateVector)
			}
			st, err := EncodeStateAsUpdate(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "state", st, rv.State)
			assertHex(t, "state vector", d.EncodeStateVector(), rv.StateVector)
			assertJSON(t, d, rv.JSON)
			diff, err := EncodeStateAsUpdate(d, unhex(t, rv.DiffAgainst))
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "diff", diff, rv.Diff)
		})
	}
}

func TestVectorsUpdateFunctions(t *testing.T) {
	for _, fv := range loadVectors(t).Fns {
		t.Run(fv.Name, func(t *testing.T) {
			ups := make([][]byte, len(fv.Updates))
			for i, u := range fv.Updates {
				ups[i] = unhex(t, u)
				sv, err := EncodeStateVectorFromUpdate(ups[i])
				if err != nil {
					t.Fatal(err)
				}
				assertHex(t, "state vector from update "+itoa(i), sv, fv.SVFromEach[i])
			}
			merged, err := MergeUpdates(ups)
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "merged", merged, fv.Merged)
			rev := make([][]byte, len(ups))
			for i := range ups {
				rev[i] = ups[len(ups)-1-i]
			}
			mr, err := MergeUpdates(rev)
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "merged reversed", mr, fv.MergedReversed)
			sv, err := EncodeStateVectorFromUpdate(merged)
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "state vector from merged", sv, fv.SVFromMerged)
			diff, err := DiffUpdate(merged, unhex(t, fv.DiffSV))
			if err != nil {
				t.Fatal(err)
			}
			assertHex(t, "diff of merged", diff, fv.DiffOfMerged)
		})
	}
}
