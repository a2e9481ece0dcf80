// Command nmcr is the operator's inspector for Nomicore: it decodes and encodes NMCR frames,
// reads Yjs updates and inspects bbolt stores offline (GUIDE §7).
//
//	nmcr frame decode [--chunked] [--max-frame-bytes N]   # one JSON line per input frame
//	nmcr frame encode                                     # JSON lines in, hex frames out
//	nmcr doc json [--root NAME:map|array|text|xml]...     # apply updates in order, print the doc as JSON
//	nmcr doc sv                                           # hex of encodeStateVector
//	nmcr doc state [--sv HEX]                             # hex of encodeStateAsUpdate(doc, sv)
//	nmcr doc merge                                        # hex of mergeUpdates(all inputs)
//	nmcr store ls PATH | nmcr store export PATH NAMESPACE # inspect a bbolt store offline
//
// Commands that read input take lines of hex on stdin (blank lines ignored).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// command runs one top-level subcommand with its arguments (after the subcommand name) and
// returns the process exit code.
type command func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// commands holds the subcommands; each lives in its own file and registers itself in init.
var commands = map[string]command{}

func register(name string, run command) {
	if _, dup := commands[name]; dup {
		panic("nmcr: duplicate command " + name)
	}
	commands[name] = run
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "nmcr: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd(args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: nmcr <command> ...\ncommands: %s\n", strings.Join(names, ", "))
}

// subcommand reads the subcommand of `nmcr name` from args[0]: one of subs; help (usage on
// stdout, status 0); or, when it is missing or unknown, bad usage (usage on stderr, status
// 2). When ok is false the caller returns code.
func subcommand(name, usage string, args []string, stdout, stderr io.Writer, subs ...string) (sub string, code int, ok bool) {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return "", 2, false
	}
	switch sub = args[0]; {
	case slices.Contains(subs, sub):
		return sub, 0, true
	case sub == "-h" || sub == "--help" || sub == "help":
		fmt.Fprint(stdout, usage)
		return "", 0, false
	}
	fmt.Fprintf(stderr, "nmcr %s: unknown subcommand %q\n%s", name, sub, usage)
	return "", 2, false
}
