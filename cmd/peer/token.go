package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/internal/tokens"
)

// token runs `peer token add|list|remove`: the client tokens of the peer's client listener
// (editors), in DATA/tokens.json, which a running peer re-reads within a second.
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: peer token add|list|remove --data DIR [--client NAME] ...")
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("peer token "+sub, flag.ContinueOnError)
	data := fs.String("data", "", "the peer's data directory (required; its tokens file is DATA/tokens.json)")
	var client, prefix *string
	var namespaces node.StringList
	var readOnly *bool
	switch sub {
	case "add":
		client = fs.String("client", "", "the editor's name (required)")
		fs.Var(&namespaces, "namespace", "a namespace the editor may open, or * for all (repeatable; default *)")
		readOnly = fs.Bool("read-only", false, "the editor may read but not change documents")
	case "remove":
		client = fs.String("client", "", "the editor whose client tokens to remove (required)")
		prefix = fs.String("sha256", "", "only the token whose SHA-256 starts with this hex prefix (see peer token list)")
	case "list":
	default:
		fmt.Fprintf(stderr, "peer token: unknown command %q (want add, list or remove)\n", sub)
		return 2
	}
	if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "peer token %s: %s\n", sub, node.OneLine(err))
		return 1
	}
	if *data == "" {
		return fail(errors.New("--data is required: the peer's data directory (peer run --data, default nomicore-data/INSTANCE-ID)"))
	}
	path := filepath.Join(*data, tokens.FileName)
	switch sub {
	case "list":
		f, _, err := tokens.ReadFile(path)
		if err != nil {
			return fail(err)
		}
		node.ListClientTokens(f, stdout)
		return 0
	case "add":
		if *client == "" {
			return fail(errors.New("--client is required"))
		}
		return node.RunClientToken("peer token", sub, path, *client, namespaces, *readOnly, "", stdout, stderr)
	default:
		if *client == "" {
			return fail(errors.New("--client is required"))
		}
		return node.RunClientToken("peer token", sub, path, *client, nil, false, *prefix, stdout, stderr)
	}
}
