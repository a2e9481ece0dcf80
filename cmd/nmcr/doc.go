package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/yjs"
)

// docCommands is `nmcr doc json|sv|state|merge` (its JSON rules: docs/decisions.md#yjs).
var docCommands = cli.Group{
	Path: "nmcr doc",
	About: "Reads Yjs v1 updates on stdin — hex lines (nmcr store export), raw bytes (curl …/update), an event " +
		"stream (curl …/events) or base64 lines; --in names the form, by default it is detected — applies them " +
		"in order to a fresh document and prints what you ask for.",
	Commands: []cli.Command{
		{Name: "json", Summary: "print the document as JSON", Run: docRunner("json")},
		{Name: "sv", Summary: "print the hex of its state vector (encodeStateVector)", Run: docRunner("sv")},
		{Name: "state", Summary: "print the hex of its state as one update (encodeStateAsUpdate), optionally since --sv", Run: docRunner("state")},
		{Name: "merge", Summary: "print the hex of the inputs merged into one update (mergeUpdates)", Run: docRunner("merge")},
	},
}

const docAbout = `Input: Yjs v1 updates on stdin, in one of these forms (--in; by default detected): hex, one ` +
	`update per line (blank lines ignored; what "nmcr store export" prints); base64, one update per line, or ` +
	`the admin API's event stream (data: lines; "curl -sN …/events"); binary, the whole input is one update ` +
	`("curl -s …/update").
doc json renders every root: a --root declares its type (declared roots are typed before any update is ` +
	`applied, as a client that declares them would); the others are inferred (keyed items: map; string, format ` +
	`or embed content: text; otherwise array). JSON rules: map → object, array → array, text → string, xml → ` +
	`its toString(); Uint8Array → {"$bytes":hex}, bigint → {"$bigint":"n"}, subdocument → {"$doc":guid}, ` +
	`undefined → {"$undefined":true}, NaN/±Infinity → {"$number":…}.
Exit status: 0 on success; 1 when there is no update, or one does not decode (named on stderr, nothing on ` +
	`stdout); 2 for bad usage.`

func docRunner(sub string) func([]string, cli.IO) int {
	return func(args []string, cio cli.IO) int { return runDoc(sub, args, cio) }
}

// rootFlags collects --root NAME:TYPE declarations.
type rootFlags struct {
	names []string
	kinds map[string]yjs.Kind
}

func (r *rootFlags) String() string { return strings.Join(r.names, ",") }

func (r *rootFlags) Set(v string) error {
	for _, decl := range strings.Split(v, ",") {
		name, k, err := yjs.ParseRootSpec(decl)
		if err != nil {
			return err
		}
		if prev, dup := r.kinds[name]; dup && prev != k {
			return fmt.Errorf("root %q declared twice with different types", name)
		}
		if r.kinds == nil {
			r.kinds = map[string]yjs.Kind{}
		}
		if _, dup := r.kinds[name]; !dup {
			r.names = append(r.names, name)
		}
		r.kinds[name] = k
	}
	return nil
}

// svFlag is --sv HEX: a state vector, validated when set.
type svFlag struct{ b []byte }

func (s *svFlag) String() string { return hex.EncodeToString(s.b) }

func (s *svFlag) Set(v string) error {
	b, err := hex.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not hex: %v", err)
	}
	if _, err := yjs.DecodeStateVector(b); err != nil {
		return err
	}
	s.b = b
	return nil
}

// runDoc runs `nmcr doc SUB`.
func runDoc(sub string, args []string, cio cli.IO) int {
	synopsis := map[string]string{
		"json":  "nmcr doc json [--root NAME:map|array|text|xml]... [--in hex|base64|binary] [--no-gc] < UPDATES",
		"sv":    "nmcr doc sv [--in hex|base64|binary] [--no-gc] < UPDATES",
		"state": "nmcr doc state [--sv HEX] [--in hex|base64|binary] [--no-gc] < UPDATES",
		"merge": "nmcr doc merge [--in hex|base64|binary] < UPDATES",
	}[sub]
	f := cli.NewFlags("nmcr doc "+sub, synopsis, docAbout)
	var roots rootFlags
	var sv svFlag
	var noGC bool
	in := f.String("in", "", "the input's `FORM`: hex, base64 or binary (default: detected)")
	if sub != "merge" {
		f.BoolVar(&noGC, "no-gc", false, "keep deleted content (a document with gc off)")
	}
	switch sub {
	case "json":
		f.Var(&roots, "root", "declare a root's type, `NAME:TYPE` with TYPE map, array, text or xml (repeatable or comma-separated)")
	case "state":
		f.Var(&sv, "sv", "the state vector to diff against, in `HEX` (default: everything)")
	}
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	if len(operands) > 0 {
		return f.Mistake(cio, "unexpected argument %q (the updates come on stdin)", operands[0])
	}
	switch *in {
	case "", inHex, inBase64, inBinary:
	default:
		return f.Mistake(cio, "--in %q: want hex, base64 or binary", *in)
	}
	stdout, stderr := cio.Stdout, cio.Stderr

	updates, err := readUpdates(cio.Stdin, *in)
	if err != nil {
		fmt.Fprintf(stderr, "nmcr doc %s: %v\n", sub, err)
		return 1
	}
	if len(updates) == 0 {
		fmt.Fprintf(stderr, "nmcr doc %s: no update on stdin (did the command before the pipe fail? an empty document is the update 0000)\n", sub)
		return 1
	}

	if sub == "merge" {
		merged, err := yjs.MergeUpdates(updates)
		if err != nil {
			fmt.Fprintf(stderr, "nmcr doc merge: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, hex.EncodeToString(merged))
		return 0
	}

	doc := yjs.NewDoc(yjs.WithGC(!noGC))
	for _, name := range roots.names {
		if _, err := doc.Get(name, roots.kinds[name]); err != nil {
			return f.Mistake(cio, "--root %q: %v", name, err)
		}
	}
	for i, u := range updates {
		if err := yjs.ApplyUpdate(doc, u, nil); err != nil {
			var de *yjs.DecodeError
			if errors.As(err, &de) {
				fmt.Fprintf(stderr, "nmcr doc %s: update %d: %v\n", sub, i+1, err)
			} else {
				fmt.Fprintf(stderr, "nmcr doc %s: update %d: internal error: %v\n", sub, i+1, err)
			}
			return 1
		}
	}
	switch sub {
	case "json":
		b, err := json.Marshal(doc.ToJSON())
		if err != nil {
			fmt.Fprintf(stderr, "nmcr doc json: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
	case "sv":
		fmt.Fprintln(stdout, hex.EncodeToString(doc.EncodeStateVector()))
	case "state":
		st, err := yjs.EncodeStateAsUpdate(doc, sv.b)
		if err != nil {
			fmt.Fprintf(stderr, "nmcr doc state: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, hex.EncodeToString(st))
	}
	return 0
}
