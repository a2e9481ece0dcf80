// Command hub is the Nomicore hub: the replication endpoint peers connect to over WebSocket
// with bearer tokens (/v1/replication), and the admin HTTP API applications use (GUIDE §7, §8).
//
//	hub [serve] --instance-id hub --listen 127.0.0.1:8787 --admin-listen 127.0.0.1:8788 \
//	            --data ./nomicore-data/hub [--tokens FILE]      # defaults shown
//	hub token add --data DIR --peer PEER_ID [--owner default] [--namespace ns-…|*]... [--read-only]
//	hub token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only]   # an editor's token
//	hub token list --data DIR
//	hub token remove --data DIR --peer PEER_ID|--client NAME [--sha256 PREFIX]
//	hub write --namespace ns-… [--map ROOT] KEY=VALUE...        # a client of the admin API
//
// Editors (stock y-websocket providers) connect to the client listener, --client-listen
// (default 127.0.0.1:8789): ws://HOST:PORT/v1/yjs/{namespaceId}?token=… ; the editor page is
// http://HOST:PORT/edit/{namespaceId}?token=… .
//
// Every flag can also be set with an environment variable NOMICORE_<FLAG> (for example
// NOMICORE_ADMIN_LISTEN). Logs are JSON lines on stderr.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' {
		return serve(args, getenv, stdout, stderr)
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], getenv, stdout, stderr)
	case "token":
		return token(args[1:], getenv, stdout, stderr)
	case "write":
		return write(args[1:], getenv, stdout, stderr)
	case "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "hub: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  hub [serve] [--instance-id hub] [--listen 127.0.0.1:8787] [--admin-listen 127.0.0.1:8788]
              [--data ./nomicore-data/hub] [--tokens FILE] [flags]
  hub token add --data DIR --peer PEER_ID [--owner default] [--namespace ns-…|*]... [--read-only]
  hub token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only]
  hub token list --data DIR
  hub token remove --data DIR --peer PEER_ID|--client NAME [--sha256 PREFIX]
  hub write --namespace ns-… [--map ROOT] [--admin-url URL] KEY=VALUE...
Run "hub serve -h" for every flag; each flag also reads NOMICORE_<FLAG>.
`)
}
