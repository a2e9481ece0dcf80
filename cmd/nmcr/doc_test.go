package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The expected outputs come from JS yjs: yjs/testdata/vectors.json (made by
// yjs/testdata/gen/gen.mjs).

type docVectors struct {
	Remote []struct {
		Name        string
		GC          bool
		Roots       map[string]string
		Updates     []string
		Order       []int
		State       string
		StateVector string
		JSON        json.RawMessage
		DiffAgainst string
		Diff        string
	}
	Fns []struct {
		Name    string
		Updates []string
		Merged  string
	} `json:"updateFunctions"`
}

func loadDocVectors(t *testing.T) docVectors {
	t.Helper()
	b, err := os.ReadFile("../../yjs/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v docVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func runNmcr(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runEnv(args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func sameJSON(t *testing.T, got string, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("output is not JSON: %v: %q", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
}

func TestDocCommandAgainstJSVectors(t *testing.T) {
	v := loadDocVectors(t)
	for _, rv := range v.Remote {
		t.Run(rv.Name, func(t *testing.T) {
			var in strings.Builder
			for k, i := range rv.Order {
				if k%2 == 1 {
					in.WriteString("\n  \n") // blank lines are ignored
				}
				line := rv.Updates[i]
				if k%3 == 0 {
					line = strings.ToUpper(line)
				}
				in.WriteString(line + "\n")
			}
			var args, gc []string
			if !rv.GC {
				gc = []string{"--no-gc"}
			}
			for name, typ := range rv.Roots {
				args = append(args, "--root", name+":"+typ)
			}
			code, out, errs := runNmcr(t, in.String(), nil, append(append([]string{"doc", "json"}, gc...), args...)...)
			if code != 0 {
				t.Fatalf("json: exit %d: %s", code, errs)
			}
			sameJSON(t, out, rv.JSON)
			if code, out, errs = runNmcr(t, in.String(), nil, append([]string{"doc", "sv"}, gc...)...); code != 0 || out != rv.StateVector+"\n" {
				t.Fatalf("sv: exit %d %q %s, want %s", code, out, errs, rv.StateVector)
			}
			if code, out, errs = runNmcr(t, in.String(), nil, append([]string{"doc", "state"}, gc...)...); code != 0 || out != rv.State+"\n" {
				t.Fatalf("state: exit %d %q %s", code, out, errs)
			}
			if code, out, errs = runNmcr(t, in.String(), nil, append([]string{"doc", "state", "--sv", rv.DiffAgainst}, gc...)...); code != 0 || out != rv.Diff+"\n" {
				t.Fatalf("state --sv: exit %d %q %s", code, out, errs)
			}
			if code, out, _ = runNmcr(t, in.String(), map[string]string{"NOMICORE_SV": rv.DiffAgainst, "NOMICORE_NO_GC": map[bool]string{true: "", false: "true"}[rv.GC]}, "doc", "state"); code != 0 || out != rv.Diff+"\n" {
				t.Fatalf("state with NOMICORE_SV: exit %d %q", code, out)
			}
		})
	}
	for _, fv := range v.Fns {
		code, out, errs := runNmcr(t, strings.Join(fv.Updates, "\n"), nil, "doc", "merge")
		if code != 0 || out != fv.Merged+"\n" {
			t.Fatalf("%s: merge: exit %d %q %s", fv.Name, code, out, errs)
		}
	}
}

func TestDocJSONInfersAndDeclaresRoots(t *testing.T) {
	v := loadDocVectors(t)
	rv := v.Remote[2] // "map conflicts": one root, a map
	input := strings.Join(rv.Updates, "\n")
	code, out, errs := runNmcr(t, input, nil, "doc", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	sameJSON(t, out, rv.JSON)
	code, out, _ = runNmcr(t, input, map[string]string{"NOMICORE_ROOT": "map:map,extra:text"}, "doc", "json")
	if code != 0 || !strings.Contains(out, `"extra":""`) {
		t.Fatalf("NOMICORE_ROOT: exit %d %q", code, out)
	}
}

func TestDocCommandErrors(t *testing.T) {
	good := loadDocVectors(t).Remote[0].Updates[0]
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
	}{
		{"no subcommand", "", []string{"doc"}, 2},
		{"unknown subcommand", "", []string{"doc", "frob"}, 2},
		{"bad root type", good, []string{"doc", "json", "--root", "a:tree"}, 2},
		{"root without type", good, []string{"doc", "json", "--root", "a"}, 2},
		{"conflicting roots", good, []string{"doc", "json", "--root", "a:map", "--root", "a:text"}, 2},
		{"bad --sv", good, []string{"doc", "state", "--sv", "zz"}, 2},
		{"truncated --sv", good, []string{"doc", "state", "--sv", "01"}, 2},
		{"extra argument", good, []string{"doc", "sv", "x"}, 2},
		{"not hex", good + "\nxyz\n", []string{"doc", "sv"}, 1},
		{"malformed update", good + "\n0102\n", []string{"doc", "json"}, 1},
		{"malformed update in merge", good + "\n0102\n", []string{"doc", "merge"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runNmcr(t, c.stdin, nil, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errs)
			}
			if out != "" && c.code != 0 {
				t.Fatalf("printed %q on failure", out)
			}
			if errs == "" {
				t.Fatal("nothing on stderr")
			}
		})
	}
	// No input is an error (a failed command before the pipe must not look like an empty
	// document); an empty document is the update 0000.
	for _, sub := range []string{"json", "sv", "state", "merge"} {
		if code, out, errs := runNmcr(t, "\n\n", nil, "doc", sub); code != 1 || out != "" || !strings.Contains(errs, "no update on stdin") {
			t.Fatalf("doc %s of no input: %d %q %q", sub, code, out, errs)
		}
	}
	if code, out, _ := runNmcr(t, "0000\n", nil, "doc", "state"); code != 0 || out != "0000\n" {
		t.Fatalf("empty state: %d %q", code, out)
	}
	if code, out, _ := runNmcr(t, "0000", nil, "doc", "json"); code != 0 || out != "{}\n" {
		t.Fatalf("empty json: %d %q", code, out)
	}
	// through the dispatcher
	var stdout, stderr bytes.Buffer
	if code := run([]string{"doc", "sv"}, strings.NewReader(good), &stdout, &stderr); code != 0 || stdout.Len() == 0 {
		t.Fatalf("run doc sv: %d %q", code, stderr.String())
	}
}
