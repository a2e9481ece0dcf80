package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nomicore/nomicore/internal/envflag"
	"github.com/nomicore/nomicore/yjs"
)

func init() { register("doc", runDoc) }

const docUsage = `usage:
  nmcr doc json [--root NAME:map|array|text|xml]...   apply the updates in order, print the doc as JSON
  nmcr doc sv                                         print the hex of encodeStateVector(doc)
  nmcr doc state [--sv HEX]                           print the hex of encodeStateAsUpdate(doc, sv)
  nmcr doc merge                                      print the hex of mergeUpdates(all inputs)
json, sv and state also take --no-gc: keep deleted content (a Y.Doc with gc: false).
Input: Yjs v1 updates, one per line in hex on stdin (blank lines ignored).
doc json renders every root: a --root declares its type (declared roots are typed before
any update is applied, as a client that declares them would); the others are inferred
(keyed items: map; string, format or embed content: text; otherwise array). JSON rules:
map → object, array → array, text → string, xml → its toString(); Uint8Array →
{"$bytes":hex}, bigint → {"$bigint":"n"}, subdocument → {"$doc":guid}, undefined →
{"$undefined":true}, NaN/±Infinity → {"$number":…}.
The exit status is 0 on success, 1 when a line is not hex or not a valid update (named on
stderr, nothing printed on stdout), 2 for bad usage. --root also reads NOMICORE_ROOT
(comma-separated), --sv NOMICORE_SV, --no-gc NOMICORE_NO_GC.
`

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

// runDoc is `nmcr doc json|sv|state|merge` (GUIDE §7).
func runDoc(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runDocEnv(args, stdin, stdout, stderr, os.Getenv)
}

func runDocEnv(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	sub, code, ok := subcommand("doc", docUsage, args, stdout, stderr, "json", "sv", "state", "merge")
	if !ok {
		return code
	}
	fs := flag.NewFlagSet("nmcr doc "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var roots rootFlags
	var sv svFlag
	var noGC bool
	if sub != "merge" {
		fs.BoolVar(&noGC, "no-gc", false, "keep deleted content (gc off)")
	}
	switch sub {
	case "json":
		fs.Var(&roots, "root", "declare a root: NAME:map|array|text|xml (repeatable)")
	case "state":
		fs.Var(&sv, "sv", "the state vector (hex) to diff against (default: everything)")
	}
	if err := envflag.Apply(fs, getenv); err != nil {
		fmt.Fprintf(stderr, "nmcr doc: %v\n", err)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nmcr doc %s: unexpected arguments %q\n%s", sub, fs.Args(), docUsage)
		return 2
	}

	var updates [][]byte
	err := eachLine(stdin, func(lineNo int, line []byte) error {
		u, err := decodeHexLine(line)
		if err != nil {
			return fmt.Errorf("line %d: not hex: %v", lineNo, err)
		}
		updates = append(updates, u)
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "nmcr doc %s: %v\n", sub, err)
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
			fmt.Fprintf(stderr, "nmcr doc: root %q: %v\n", name, err)
			return 2
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
