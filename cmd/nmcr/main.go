// Command nmcr is the operator's inspector for Nomicore: it decodes and encodes replication
// messages (frames), reads Yjs updates, and looks into a stopped instance's bbolt store.
//
//	nmcr frame decode [--chunked] [--max-frame-bytes N]   # one JSON line per input frame
//	nmcr frame encode                                     # JSON lines in, hex frames out
//	nmcr doc json [--root NAME:map|array|text|xml]...     # apply updates in order, print the doc as JSON
//	nmcr doc sv                                           # hex of encodeStateVector
//	nmcr doc state [--sv HEX]                             # hex of encodeStateAsUpdate(doc, sv)
//	nmcr doc merge                                        # hex of mergeUpdates(all inputs)
//	nmcr store ls PATH | nmcr store export PATH NAMESPACE # inspect a bbolt store offline
//	nmcr store check PATH [NAMESPACE]                     # rebuild documents, say which may be damaged
//
// The frame commands read lines of hex (or a capture file written by --capture-frames); the
// doc commands read updates as hex lines, base64 lines, Server-Sent Events or raw binary
// (detected, or named with --in). `nmcr -h` lists the commands, `nmcr <command> -h`
// explains one.
package main

import (
	"io"
	"os"

	"github.com/nomicore/nomicore/node/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// nmcr is the command tree.
var nmcr = cli.Group{
	Path: "nmcr",
	About: "nmcr reads what Nomicore writes: replication messages (captured with --capture-frames, or hex), " +
		"Yjs updates (from the admin API, its event stream, or a store), and stopped instances' stores.",
	Commands: []cli.Command{
		frameCommands.Command("frame", "decode replication messages to JSON lines, or encode them (decode, encode)"),
		docCommands.Command("doc", "read Yjs updates: the document as JSON, its state vector, state or merge (json, sv, state, merge)"),
		storeCommands.Command("store", "look into a stopped hub's or peer's store (ls, export, check) or compact it"),
	},
	Version: true,
	Footer:  "Every flag can also be set as NOMICORE_<FLAG>.",
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(args, stdin, stdout, stderr, os.Getenv)
}

func runEnv(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return nmcr.Run(args, cli.IO{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}
