package main

import (
	"fmt"
	"path/filepath"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
)

// tokenCommands is `peer token add|list|remove`: the client tokens of the peer's client
// listener (editors), in DATA/tokens.json, which a running peer re-reads within a second.
var tokenCommands = cli.Group{
	Path: "peer token",
	About: "Editors (stock y-websocket and Hocuspocus providers) authenticate to the peer's client listener with client tokens. " +
		"The peer's tokens file (DATA/tokens.json) keeps only the SHA-256 of each token with the editor's name, the " +
		"namespaces it may open and whether it may change them; a running peer applies each change within a second.",
	Commands: []cli.Command{
		{Name: "add", Summary: "create an editor's client token, print it once (the peer keeps only its hash)", Run: tokenAdd},
		{Name: "list", Summary: "list the editors with their token hashes and grants", Run: tokenList},
		{Name: "change", Summary: "give an editor's client token other namespaces or access; the token stays the same", Run: tokenChange},
		{Name: "remove", Summary: "remove an editor's client tokens; its editors are closed", Run: tokenRemove},
	},
}

// tokenFlags returns the flags of `peer token SUB` and the tokens file path they name.
func tokenFlags(sub, synopsis, about string) (*cli.Flags, func() string) {
	f := cli.NewFlags("peer token "+sub, "peer token "+sub+" "+synopsis, about)
	data := f.String("data", "", "the peer's data `DIR` (required; what peer run --data names, default nomicore-data/INSTANCE-ID)")
	return f, func() string { return filepath.Join(*data, auth.FileName) }
}

// parseTokenFlags parses f, refuses operands and requires --data.
func parseTokenFlags(f *cli.Flags, args []string, cio cli.IO) (int, bool) {
	operands, code, ok := f.Parse(args, cio)
	switch {
	case !ok:
		return code, false
	case len(operands) > 0:
		return f.Mistake(cio, "unexpected argument %q", operands[0]), false
	case f.Lookup("data").Value.String() == "":
		return f.Mistake(cio, "--data is required: the peer's data directory"), false
	}
	return 0, true
}

func tokenAdd(args []string, cio cli.IO) int {
	f, path := tokenFlags("add", "--data DIR --client NAME [--namespace ns-…|*]... [--read-only] [--expires 24h]",
		"Creates a random client token for an editor, stores only its SHA-256 in the peer's tokens file and prints "+
			"the token once, on stdout. Editors present it as ?token=… on ws://HOST:8791/v1/yjs/{namespaceId} (or an "+
			"Authorization: Bearer header); the editor page is http://HOST:8791/edit/{namespaceId}?token=….")
	client := f.String("client", "", "the editor's `NAME` (required; it shows in the peer's logs)")
	var namespaces node.StringList
	f.Var(&namespaces, "namespace", "a `namespace` the editor may open (ns-…), or * for all (repeatable or comma-separated; default *)")
	readOnly := f.Bool("read-only", false, "the editor may read but not change documents")
	expires := f.Duration("expires", 0, "the token stops working after this `DURATION` (24h, 90m); default never; open editors are closed then")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	if *client == "" {
		return f.Mistake(cio, "--client is required")
	}
	return node.RunClientToken("peer token", "add", path(), *client, namespaces, *readOnly, *expires, "", cio.Stdout, cio.Stderr)
}

func tokenList(args []string, cio cli.IO) int {
	f, path := tokenFlags("list", "--data DIR",
		"Lists one line per client token: client:NAME, the first hex digits of its SHA-256 (what --sha256 takes), "+
			"read,write or read-only, and the namespaces.")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	file, _, err := auth.ReadFile(path())
	if err != nil {
		fmt.Fprintf(cio.Stderr, "peer token list: %s\n", node.OneLine(err))
		return 1
	}
	node.ListClientTokens(file, cio.Stdout)
	return 0
}

func tokenRemove(args []string, cio cli.IO) int {
	f, path := tokenFlags("remove", "--data DIR --client NAME [--sha256 PREFIX]",
		"Removes an editor's client tokens (or one of them, with --sha256). A running peer closes the editors that "+
			"used them within a second.")
	client := f.String("client", "", "the editor whose client tokens to remove (required)")
	prefix := f.String("sha256", "", "only the token whose SHA-256 starts with these hex digits, a `PREFIX` from peer token list")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	if *client == "" {
		return f.Mistake(cio, "--client is required")
	}
	return node.RunClientToken("peer token", "remove", path(), *client, nil, false, 0, *prefix, cio.Stdout, cio.Stderr)
}

func tokenChange(args []string, cio cli.IO) int {
	f, path := tokenFlags("change", "--data DIR --client NAME [--namespace ns-…|*]... [--read-only|--read-write]",
		"Gives an editor's client token other namespaces (the list replaces the old one) or another access, and keeps "+
			"the token: an editor given a second namespace goes on with the token it has. A running peer applies the "+
			"change within a second; editors of namespaces the token no longer opens are closed.")
	c := node.RegisterClientChange(f)
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	return node.RunClientChange("peer token", path(), c, f, cio)
}
