package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/internal/tokens"
)

// token runs `hub token add|list|remove`: edits of the tokens file, which a running hub
// re-reads within a second (or at SIGHUP).
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: hub token add|list|remove --data DIR ...")
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("hub token "+sub, flag.ContinueOnError)
	data := fs.String("data", "./nomicore-data/hub", "the hub's data directory")
	file := fs.String("tokens", "", "the tokens file (default DATA/tokens.json)")
	path := func() string {
		if *file != "" {
			return *file
		}
		return filepath.Join(*data, tokens.FileName)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "hub token %s: %s\n", sub, node.OneLine(err))
		return 1
	}
	switch sub {
	case "add":
		peer := fs.String("peer", "", "the peer's instance id (a replication token; this or --client is required)")
		client := fs.String("client", "", "an editor's name (a client token for the client listener: --namespace and --read-only apply, --owner does not)")
		owner := fs.String("owner", "default", "the hub's local owner of the peer's namespaces")
		var namespaces node.StringList
		fs.Var(&namespaces, "namespace", "a namespace the peer may replicate, or * for all (repeatable; default *)")
		readOnly := fs.Bool("read-only", false, "the peer may read but not submit updates")
		if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
			return code
		}
		if *client != "" {
			if *peer != "" {
				return fail(fmt.Errorf("give --peer or --client, not both"))
			}
			return node.RunClientToken("hub token", sub, path(), *client, namespaces, *readOnly, "", stdout, stderr)
		}
		if len(namespaces) == 0 {
			namespaces = node.StringList{tokens.AllNamespaces}
		}
		tok, err := tokens.Add(path(), tokens.Grant{PeerInstanceID: *peer, Owner: *owner, Namespaces: namespaces,
			Read: true, Submit: !*readOnly}, nil)
		if err != nil {
			return fail(err)
		}
		// The token goes to stdout, once; the hub keeps only its SHA-256.
		fmt.Fprintln(stdout, tok)
		fmt.Fprintf(stderr, "hub token add: token for %s stored in %s (only its SHA-256); the token was printed once, on stdout\n", *peer, path())
		return 0
	case "list":
		if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
			return code
		}
		f, _, err := tokens.ReadFile(path())
		if err != nil {
			return fail(err)
		}
		defer node.ListClientTokens(f, stdout)
		for _, e := range f.Peers {
			perm := "read"
			if e.Submit {
				perm += ",submit"
			}
			fmt.Fprintf(stdout, "%s\tsha256:%s…\towner=%s\t%s\t%v\n", e.PeerInstanceID, hex.EncodeToString(e.TokenSHA256[:6]), e.Owner, perm, e.Namespaces)
		}
		return 0
	case "remove":
		peer := fs.String("peer", "", "the peer whose tokens to remove (this or --client is required)")
		client := fs.String("client", "", "the editor whose client tokens to remove")
		prefix := fs.String("sha256", "", "only the token whose SHA-256 starts with this hex prefix (see hub token list)")
		if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
			return code
		}
		if *client != "" && *peer == "" {
			return node.RunClientToken("hub token", sub, path(), *client, nil, false, *prefix, stdout, stderr)
		}
		if *peer == "" || *client != "" {
			return fail(fmt.Errorf("give --peer or --client"))
		}
		n, err := tokens.Remove(path(), *peer, *prefix)
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			return fail(fmt.Errorf("no token of %s matched", *peer))
		}
		fmt.Fprintf(stderr, "hub token remove: removed %d token(s) of %s; a running hub revokes them within a second\n", n, *peer)
		return 0
	}
	fmt.Fprintf(stderr, "hub token: unknown command %q (want add, list or remove)\n", sub)
	return 2
}

func write(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return node.RunWrite("hub", "http://127.0.0.1:8788", args, getenv, stdout, stderr)
}
