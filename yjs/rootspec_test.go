package yjs

import "testing"

func TestParseRootSpec(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		kind Kind
		ok   bool
	}{
		{"notes:map", "notes", KindMap, true},
		{"a:b:array", "a:b", KindArray, true},
		{"t:text", "t", KindText, true},
		{"x:xml", "x", KindXmlFragment, true},
		{"notes", "", KindUnknown, false},
		{":map", "", KindUnknown, false},
		{"notes:set", "", KindUnknown, false},
	} {
		name, kind, err := ParseRootSpec(c.in)
		if (err == nil) != c.ok || name != c.name || kind != c.kind {
			t.Errorf("ParseRootSpec(%q) = %q, %v, %v", c.in, name, kind, err)
		}
	}
}
