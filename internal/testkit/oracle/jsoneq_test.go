package oracle

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEqualJSON(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want string // "" when equal, else a substring of the difference
	}{
		{`{"a":1,"b":[true,null,"x"]}`, `{"b":[true,null,"x"],"a":1}`, ""},
		{`{"n":-0}`, `{"n":0}`, ""},
		{`[1, 2.0, 1e2]`, `[1.0, 2, 100]`, ""},
		{`{"s":"😀"}`, `{"s":"\ud83d\ude00"}`, ""},
		{`{"a":1}`, `{"a":2}`, `$.a: 1 vs 2`},
		{`{"a":1}`, `{"a":"1"}`, `$.a: 1 vs "1"`},
		{`{"a":1}`, `{"a":1,"b":2}`, `$.b: missing in the first`},
		{`{"a":1,"🔑":2}`, `{"a":1}`, `$["🔑"]: missing in the second`},
		{`{"m":{"x":[1,[2,3]]}}`, `{"m":{"x":[1,[2,4]]}}`, `$.m.x[1][1]: 3 vs 4`},
		{`[1,2]`, `[1,2,3]`, `$: array length 2 vs 3`},
		{`{"t":"hello world"}`, `{"t":"hello there"}`, `$.t: strings differ at byte 6: "world" vs "there"`},
		{`{"a":{}}`, `{"a":[]}`, `$.a: {} vs []`},
		{`{"a":null}`, `{"a":false}`, `$.a: null vs false`},
		{`[1e400, -1e400, 1e-400]`, `[2e400, -3e999, 0]`, ""},
		{`{"a":`, `{}`, `invalid JSON (first)`},
		{`{}`, `{} x`, `invalid JSON (second)`},
	} {
		ok, diff := EqualJSON([]byte(tc.a), []byte(tc.b))
		switch {
		case tc.want == "" && (!ok || diff != ""):
			t.Errorf("EqualJSON(%s, %s) = false, %q; want equal", tc.a, tc.b, diff)
		case tc.want != "" && (ok || !strings.Contains(diff, tc.want)):
			t.Errorf("EqualJSON(%s, %s) = %v, %q; want a difference containing %q", tc.a, tc.b, ok, diff, tc.want)
		}
	}
}

// EqualJSON never panics, is reflexive on valid JSON and symmetric.
func FuzzEqualJSON(f *testing.F) {
	f.Add([]byte(`{"a":[1,-0,{"$bytes":"00"}],"b":"😀"}`), []byte(`{"b":"😀","a":[1,0,{"$bytes":"00"}]}`))
	f.Add([]byte(`[1,2]`), []byte(`[1,2,3]`))
	f.Add([]byte(`"x"`), []byte(`{`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ab, _ := EqualJSON(a, b)
		ba, _ := EqualJSON(b, a)
		if ab != ba {
			t.Fatalf("EqualJSON not symmetric for %q, %q", a, b)
		}
		if json.Valid(a) {
			if ok, diff := EqualJSON(a, a); !ok {
				t.Fatalf("EqualJSON(a, a) false for %q: %s", a, diff)
			}
		}
	})
}
