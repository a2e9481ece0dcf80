// Command hub is the Nomicore hub: the reference copy of every namespace (one Yjs document
// each), the replication endpoint peers connect to over WebSocket with bearer tokens
// (/v1/replication), and the admin HTTP API applications use.
//
//	hub [serve] --instance-id hub --listen 127.0.0.1:8787 --admin-listen 127.0.0.1:8788 \
//	            --data ./nomicore-data/hub [--tokens FILE]      # defaults shown
//	hub token add|list|rotate|remove --data DIR ...             # the peers' tokens
//	hub token add --data DIR --client NAME [--namespace ns-…|*]... [--read-only] [--expires 24h]   # an editor's
//	hub token change --data DIR --client NAME [--namespace ns-…|*]... [--read-only|--read-write]
//	hub write --namespace ns-… [--map ROOT] KEY=VALUE...        # a client of the admin API
//	hub backup --admin URL --out FILE                           # a backup of a running hub
//	hub restore --from FILE --data DIR [--restore-fence]        # a data directory from one
//
// Editors (stock y-websocket and Hocuspocus providers) connect to the client listener, --client-listen
// (default 127.0.0.1:8789): ws://HOST:PORT/v1/yjs/{namespaceId}?token=… ; the editor page is
// http://HOST:PORT/edit/{namespaceId}?token=… .
//
// `hub -h` lists the commands, `hub <command> -h` explains one. Every flag can also be set
// with an environment variable NOMICORE_<FLAG> (for example NOMICORE_ADMIN_LISTEN).
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

// hub is the command tree.
var hub = cli.Group{
	Path: "hub",
	About: "The Nomicore hub keeps the reference copy of every namespace (one Yjs document each), " +
		"serves the peers that replicate them, the admin API applications use, and the y-websocket endpoint " +
		"editors use.",
	Commands: []cli.Command{
		{Name: "serve", Summary: "run the hub: the replication endpoint for peers and the admin API", Run: serve},
		tokenCommands.Command("token", "manage the peers' and editors' tokens in the hub's tokens file (add, list, rotate, remove)"),
		node.WriteCommand("hub", "http://127.0.0.1:8788"),
		{Name: "backup", Summary: "take a backup of a running hub through its admin API, checked as it arrives", Run: backupCommand},
		{Name: "restore", Summary: "prepare a data directory from a backup", Run: restoreCommand},
	},
	Default: "serve",
	Version: true,
	Footer:  "Every flag can also be set as NOMICORE_<FLAG>; docs/operations.md covers running it for real.",
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return hub.Run(args, cli.IO{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}
