// Command peer is a Nomicore peer: a full replica of its target namespaces in its own bbolt
// store, replicating with one hub over a WebSocket with a bearer token, and the admin HTTP
// API local applications use.
//
//	peer [run] --instance-id peer-a --hub-url ws://127.0.0.1:8787/v1/replication \
//	           --hub-instance-id hub --token-file FILE --admin-listen 127.0.0.1:8790 \
//	           --data ./nomicore-data/peer-a [--target ns-…[:OWNER]]...
//	peer write --namespace ns-… [--map ROOT] KEY=VALUE...       # a client of the admin API
//	peer token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only] [--expires 24h]
//	peer token change --data DIR --client NAME [--namespace ns-…|*]... [--read-only|--read-write]
//	peer token list --data DIR | peer token remove --data DIR --client NAME
//
// Editors (stock y-websocket and Hocuspocus providers) connect to the client listener, --client-listen
// (default 127.0.0.1:8791): ws://HOST:PORT/v1/yjs/{namespaceId}?token=… ; the editor page is
// http://HOST:PORT/edit/{namespaceId}?token=… .
//
// The token comes from --token-file (re-read before every dial) or the NOMICORE_TOKEN
// environment variable. `peer -h` lists the commands, `peer <command> -h` explains one;
// every flag can also be set with NOMICORE_<FLAG>.
package main

import (
	"io"
	"os"

	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// peer is the command tree.
var peer = cli.Group{
	Path: "peer",
	About: "A Nomicore peer keeps a full replica of its target namespaces in its own store, replicates them with " +
		"the hub, and serves the admin API local applications use and the y-websocket endpoint editors use (reads and " +
		"writes work while the hub is away).",
	Commands: []cli.Command{
		{Name: "run", Summary: "run the peer: replicate the targets with the hub, serve the admin API", Run: runPeer},
		node.WriteCommand("peer", "http://127.0.0.1:8790"),
		tokenCommands.Command("token", "manage the client tokens of the peer's editors (add, list, remove)"),
	},
	Default: "run",
	Version: true,
	Footer:  "Every flag can also be set as NOMICORE_<FLAG>; docs/operations.md covers running it for real.",
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return peer.Run(args, cli.IO{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}
