// Command peer is a Nomicore peer: a full replica of its target namespaces in its own bbolt
// store, replicating with one hub over a WebSocket with a bearer token, and the admin HTTP
// API applications use (GUIDE §7, §8).
//
//	peer [run] --instance-id peer-a --hub-url ws://127.0.0.1:8787/v1/replication \
//	           --hub-instance-id hub --token-file FILE --admin-listen 127.0.0.1:8790 \
//	           --data ./nomicore-data/peer-a [--target ns-…[:OWNER]]...
//	peer write --namespace ns-… [--map ROOT] KEY=VALUE...       # a client of the admin API
//	peer token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only]
//	peer token list --data DIR | peer token remove --data DIR --client NAME
//
// Editors (stock y-websocket providers) connect to the client listener, --client-listen
// (default 127.0.0.1:8791): ws://HOST:PORT/v1/yjs/{namespaceId}?token=… ; the editor page is
// http://HOST:PORT/edit/{namespaceId}?token=… .
//
// The token comes from --token-file (re-read before every dial) or the NOMICORE_TOKEN
// environment variable. Every flag can also be set with NOMICORE_<FLAG>. Logs are JSON lines
// on stderr.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/nomicore/nomicore/internal/node"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' {
		return runPeer(args, getenv, stdout, stderr)
	}
	switch args[0] {
	case "run":
		return runPeer(args[1:], getenv, stdout, stderr)
	case "write":
		return node.RunWrite("peer", "http://127.0.0.1:8790", args[1:], getenv, stdout, stderr)
	case "token":
		return token(args[1:], getenv, stdout, stderr)
	case "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "peer: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  peer [run] [--instance-id peer-a] [--hub-url ws://127.0.0.1:8787/v1/replication]
             [--hub-instance-id hub] [--token-file FILE | NOMICORE_TOKEN=…]
             [--admin-listen 127.0.0.1:8790] [--data ./nomicore-data/INSTANCE-ID]
             [--target ns-…[:OWNER]]... [flags]
  peer write --namespace ns-… [--map ROOT] [--admin-url URL] KEY=VALUE...
  peer token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only]
  peer token list --data DIR
  peer token remove --data DIR --client NAME [--sha256 PREFIX]
Run "peer run -h" for every flag; each flag also reads NOMICORE_<FLAG>.
`)
}
