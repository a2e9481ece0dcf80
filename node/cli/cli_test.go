package cli

import (
	"bytes"
	"strings"
	"testing"
)

func testIO(env map[string]string) (IO, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return IO{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}, &out, &errb
}

// Flags and operands may be mixed; "--" ends the flags; the environment fills what the
// command line does not set.
func TestParseOperandsFlagsAndEnvironment(t *testing.T) {
	f := NewFlags("x run", "x run [flags] A B", "")
	name := f.String("name", "", "")
	n := f.Int("n", 1, "")
	io, _, errb := testIO(map[string]string{"NOMICORE_N": "7", "NOMICORE_NAME": "env"})
	ops, code, ok := f.Parse([]string{"a", "--name", "cli", "b", "--", "--c"}, io)
	if !ok || code != 0 || *name != "cli" || *n != 7 || strings.Join(ops, ",") != "a,b,--c" {
		t.Fatalf("ops %q code %d ok %v name %q n %d (%s)", ops, code, ok, *name, *n, errb)
	}
}

func TestParseHelpAndMistakes(t *testing.T) {
	newFlags := func() *Flags {
		f := NewFlags("x run", "x run [flags]", "Runs x.")
		f.String("listen", "127.0.0.1:1", "the `HOST:PORT` to listen on")
		f.Define("limits", func() { f.Int("max-things", 4, "things at once") })
		return f
	}
	io, out, errb := testIO(nil)
	if _, code, ok := newFlags().Parse([]string{"-h"}, io); ok || code != 0 || errb.Len() != 0 {
		t.Fatalf("-h: %d %v %q", code, ok, errb)
	}
	help := out.String()
	want := "usage: x run [flags]\n\nRuns x.\n\nflags:\n  --listen HOST:PORT\n        the HOST:PORT to listen on (default 127.0.0.1:1)\n\n" +
		"limits:\n  --max-things int\n        things at once (default 4)\n\nEvery flag can also be set as NOMICORE_<FLAG> (--listen: NOMICORE_LISTEN).\n"
	if help != want {
		t.Fatalf("help\n%s\nwant\n%s", help, want)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--nope"}, nil, "x run: unknown flag --nope; see \"x run -h\"\n"},
		{[]string{"--listen"}, nil, "x run: flag --listen needs a value; see \"x run -h\"\n"},
		{[]string{"--max-things", "many"}, nil, "x run: invalid value \"many\" for --max-things: parse error; see \"x run -h\"\n"},
		{nil, map[string]string{"NOMICORE_MAX_THINGS": "many"}, "x run: NOMICORE_MAX_THINGS=\"many\": parse error; see \"x run -h\"\n"},
	} {
		io, out, errb := testIO(tc.env)
		if _, code, ok := newFlags().Parse(tc.args, io); ok || code != 2 || out.Len() != 0 || errb.String() != tc.want {
			t.Errorf("%v: %d %v %q, want %q", tc.args, code, ok, errb, tc.want)
		}
	}
}

func TestGroupDispatch(t *testing.T) {
	var got []string
	cmd := func(name string) Command {
		return Command{Name: name, Summary: "does " + name, Run: func(args []string, _ IO) int {
			got = append(got, name+":"+strings.Join(args, ","))
			return 0
		}}
	}
	inner := Group{Path: "x tok", Commands: []Command{cmd("add")}}
	g := Group{Path: "x", Commands: []Command{cmd("serve"), inner.Command("tok", "tokens")}, Default: "serve", Version: true}
	for _, args := range [][]string{nil, {"--flag", "v"}, {"serve", "a"}, {"tok", "add", "b"}, {"help", "serve"}} {
		io, _, _ := testIO(nil)
		if code := g.Run(args, io); code != 0 {
			t.Fatalf("%v: %d", args, code)
		}
	}
	if strings.Join(got, " ") != "serve: serve:--flag,v serve:a add:b serve:-h" {
		t.Fatalf("dispatched %q", got)
	}
	io, out, _ := testIO(nil)
	g.Run([]string{"-h"}, io)
	if !strings.Contains(out.String(), "\n  serve    does serve (the default command)\n  tok      tokens\n  version  print") {
		t.Fatalf("help %q", out)
	}
	io, out, errb := testIO(nil)
	if code := g.Run([]string{"tok"}, io); code != 2 || errb.String() != "x tok: a command is required; see \"x tok -h\"\n" || out.Len() != 0 {
		t.Fatalf("group without a command: %d %q", code, errb)
	}
	io, _, errb = testIO(nil)
	if code := g.Run([]string{"nope"}, io); code != 2 || errb.String() != "x: unknown command \"nope\" (want serve, tok or version); see \"x -h\"\n" {
		t.Fatalf("unknown: %d %q", code, errb)
	}
	io, _, errb = testIO(nil)
	if code := g.Run([]string{"help", "nope"}, io); code != 2 || !strings.Contains(errb.String(), "(want serve, tok or version)") {
		t.Fatalf("help of an unknown command: %d %q", code, errb)
	}
	io, out, _ = testIO(nil)
	if code := g.Run([]string{"help", "version"}, io); code != 0 || !strings.HasPrefix(out.String(), "usage: x version (or x --version, x -v)\n") {
		t.Fatalf("help version: %d %q", code, out)
	}
}

// --version, -version, -v and version print the version, at the top level only; -v in a
// subcommand is that subcommand's mistake.
func TestVersionSpellings(t *testing.T) {
	ran := false
	g := Group{Path: "x", Commands: []Command{{Name: "serve", Run: func([]string, IO) int { ran = true; return 0 }}}, Default: "serve", Version: true}
	for _, arg := range []string{"--version", "-version", "-v", "version"} {
		io, out, errb := testIO(nil)
		if code := g.Run([]string{arg}, io); code != 0 || !strings.HasPrefix(out.String(), "x ") || errb.Len() != 0 || ran {
			t.Errorf("%s: %d %q %q (the default command ran: %v)", arg, code, out, errb, ran)
		}
	}
	inner := Group{Path: "x tok", Commands: []Command{{Name: "add"}}}
	io, out, errb := testIO(nil)
	if code := inner.Run([]string{"-v"}, io); code != 2 || out.Len() != 0 || errb.String() != "x tok: -v before a command; see \"x tok -h\"\n" {
		t.Errorf("-v in a group without a version: %d %q", code, errb)
	}
}
