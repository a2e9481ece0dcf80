package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
)

// tokenCommands is `hub token add|list|rotate|remove`: edits of the tokens file, which a
// running hub re-reads within a second (or at SIGHUP).
var tokenCommands = cli.Group{
	Path: "hub token",
	About: "Peers authenticate with bearer tokens, and so do editors (client tokens, --client). The hub's tokens " +
		"file (DATA/tokens.json) keeps only the SHA-256 of each token with the peer or editor it belongs to and what " +
		"it may use; these commands edit it safely while the hub runs, and the hub applies each change within a second.",
	Commands: []cli.Command{
		{Name: "add", Summary: "create a peer's (or, with --client, an editor's) token, print it once (the hub keeps only its hash)", Run: tokenAdd},
		{Name: "list", Summary: "list the peers and editors with their token hashes and grants", Run: tokenList},
		{Name: "rotate", Summary: "replace a peer's token with a new one, printed once; the old one stops working", Run: tokenRotate},
		{Name: "change", Summary: "give an editor's client token other namespaces or access; the token stays the same", Run: tokenChange},
		{Name: "remove", Summary: "remove a peer's (or an editor's) tokens; its connections end", Run: tokenRemove},
	},
}

// tokenFlags returns the flags of `hub token SUB` and the tokens file path they name.
func tokenFlags(sub, synopsis, about string) (*cli.Flags, func() string) {
	f := cli.NewFlags("hub token "+sub, "hub token "+sub+" "+synopsis, about)
	data := f.String("data", "./nomicore-data/hub", "the hub's data `DIR`")
	file := f.String("tokens", "", "the tokens `FILE` (default DATA/tokens.json)")
	return f, func() string {
		if *file != "" {
			return *file
		}
		return filepath.Join(*data, auth.FileName)
	}
}

func tokenFail(cio cli.IO, sub string, err error) int {
	fmt.Fprintf(cio.Stderr, "hub token %s: %s\n", sub, node.OneLine(err))
	return 1
}

// parseTokenFlags parses f and refuses operands.
func parseTokenFlags(f *cli.Flags, args []string, cio cli.IO) (int, bool) {
	operands, code, ok := f.Parse(args, cio)
	if ok && len(operands) > 0 {
		return f.Mistake(cio, "unexpected argument %q", operands[0]), false
	}
	return code, ok
}

func tokenAdd(args []string, cio cli.IO) int {
	f, path := tokenFlags("add", "--peer PEER_ID|--client NAME [--data DIR] [--owner default] [--namespace ns-…|*]... [--read-only] [--additional] [--expires 24h]",
		"Creates a random token for a peer, stores only its SHA-256 in the tokens file and prints the token once, on "+
			"stdout: write it to the peer's --token-file. A peer has one token: for a peer that already has one, "+
			"use hub token rotate, or --additional to give it a second token on purpose. With --client NAME instead, "+
			"the token is an editor's, for the client listener (ws://HOST:8789/v1/yjs/{namespaceId}?token=…): "+
			"--namespace and --read-only narrow it, --expires makes it stop working after a while; a name whose token "+
			"expired may be given a new one.")
	peer := f.String("peer", "", "the peer's `NAME`, its --instance-id (this or --client is required)")
	client := f.String("client", "", "an editor's `NAME` (a client token; the name shows in the hub's logs)")
	owner := f.String("owner", "default", "the hub's local owner (storage partition) of the peer's namespaces")
	var namespaces node.StringList
	f.Var(&namespaces, "namespace", "a `namespace` the peer may replicate (ns-…), or * for all (repeatable or comma-separated; default *)")
	readOnly := f.Bool("read-only", false, "the peer may read but not send updates")
	additional := f.Bool("additional", false, "give a peer that already has a token a second one; both stay valid (to rotate with an overlap)")
	expires := f.Duration("expires", 0, "with --client: the token stops working after this `DURATION` (24h, 90m); default never; open editors are closed then")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	switch {
	case *client != "" && *peer != "":
		return f.Mistake(cio, "give --peer or --client, not both")
	case *client != "":
		return node.RunClientToken("hub token", "add", path(), *client, namespaces, *readOnly, *expires, "", cio.Stdout, cio.Stderr)
	case *expires != 0:
		return f.Mistake(cio, "--expires is for client tokens (--client); a peer's token is replaced with hub token rotate")
	case *peer == "":
		return f.Mistake(cio, "--peer (or --client) is required")
	}
	if len(namespaces) == 0 {
		namespaces = node.StringList{auth.AllNamespaces}
	}
	add := auth.Add
	if *additional {
		add = auth.AddAnother
	}
	tok, err := add(path(), auth.PeerGrant{PeerInstanceID: *peer, Owner: *owner, Namespaces: namespaces,
		Read: true, Submit: !*readOnly}, nil)
	var existing *auth.ExistingTokenError
	if errors.As(err, &existing) {
		who := node.TokensFileFlags(path()) + " --peer " + cli.ShellArg(*peer)
		return tokenFail(cio, "add", fmt.Errorf("%v: to replace it run \"hub token rotate %s\"; to give it a second token while the first stays valid, run \"hub token add %s --additional\"",
			err, who, who))
	}
	if err != nil {
		return tokenFail(cio, "add", err)
	}
	// The token goes to stdout, once; the hub keeps only its SHA-256.
	fmt.Fprintln(cio.Stdout, tok)
	fmt.Fprintf(cio.Stderr, "hub token add: token for %s stored in %s (only its SHA-256); the token was printed once, on stdout\n", *peer, path())
	return 0
}

func tokenList(args []string, cio cli.IO) int {
	f, path := tokenFlags("list", "[--data DIR]",
		"Lists one line per token: the peer, the first hex digits of the token's SHA-256 (what --sha256 takes), "+
			"the owner, the permissions and the namespaces; then the editors' client tokens (client:NAME).")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	file, _, err := auth.ReadFile(path())
	if err != nil {
		return tokenFail(cio, "list", err)
	}
	defer node.ListClientTokens(file, cio.Stdout)
	for _, e := range file.Peers {
		perm := "read"
		if e.Submit {
			perm += ",submit"
		}
		fmt.Fprintf(cio.Stdout, "%s\tsha256:%s…\towner=%s\t%s\t%v\n", e.PeerInstanceID, auth.HashPrefix(e.TokenSHA256), e.Owner, perm, e.Namespaces)
	}
	return 0
}

func tokenRotate(args []string, cio cli.IO) int {
	f, path := tokenFlags("rotate", "--peer PEER_ID [--data DIR] [--sha256 PREFIX]",
		"Replaces a peer's token with a new one in a single write, keeping what it may replicate, and prints the new "+
			"token once, on stdout. The old token stops working at once: a running hub asks the peer to authenticate "+
			"again, and the peer is back as soon as its --token-file holds the new token.")
	peer := f.String("peer", "", "the peer whose token to replace (required)")
	prefix := f.String("sha256", "", "only the token whose SHA-256 starts with these hex digits, a `PREFIX` from hub token list")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	if *peer == "" {
		return f.Mistake(cio, "--peer is required")
	}
	tok, err := auth.Rotate(path(), *peer, *prefix, nil)
	if errors.Is(err, auth.ErrNoToken) {
		file := node.TokensFileFlags(path())
		return tokenFail(cio, "rotate", fmt.Errorf("%v (hub token list %s shows the tokens; hub token add %s --peer %s creates one)",
			err, file, file, cli.ShellArg(*peer)))
	}
	if err != nil {
		return tokenFail(cio, "rotate", err)
	}
	fmt.Fprintln(cio.Stdout, tok)
	fmt.Fprintf(cio.Stderr, "hub token rotate: new token for %s stored in %s and printed once, on stdout; the old token is no longer valid: install the new one in the peer's token file now (a running hub makes the peer authenticate again within a second)\n", *peer, path())
	return 0
}

func tokenRemove(args []string, cio cli.IO) int {
	f, path := tokenFlags("remove", "--peer PEER_ID|--client NAME [--data DIR] [--sha256 PREFIX]",
		"Removes a peer's tokens (or an editor's, with --client; or one of them, with --sha256). A running hub ends "+
			"the connections they opened within a second.")
	peer := f.String("peer", "", "the peer whose tokens to remove (this or --client is required)")
	client := f.String("client", "", "the editor whose client tokens to remove")
	prefix := f.String("sha256", "", "only the token whose SHA-256 starts with these hex digits, a `PREFIX` from hub token list")
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	switch {
	case *client != "" && *peer != "":
		return f.Mistake(cio, "give --peer or --client, not both")
	case *client != "":
		return node.RunClientToken("hub token", "remove", path(), *client, nil, false, 0, *prefix, cio.Stdout, cio.Stderr)
	case *peer == "":
		return f.Mistake(cio, "--peer (or --client) is required")
	}
	n, err := auth.Remove(path(), *peer, *prefix)
	if err != nil {
		return tokenFail(cio, "remove", err)
	}
	if n == 0 {
		return tokenFail(cio, "remove", fmt.Errorf("no token of %s matched (hub token list %s shows the tokens)", *peer, node.TokensFileFlags(path())))
	}
	fmt.Fprintf(cio.Stderr, "hub token remove: removed %d token(s) of %s; a running hub revokes them within a second\n", n, *peer)
	return 0
}

func tokenChange(args []string, cio cli.IO) int {
	f, path := tokenFlags("change", "[--data DIR] --client NAME [--namespace ns-…|*]... [--read-only|--read-write]",
		"Gives an editor's client token other namespaces (the list replaces the old one) or another access, and keeps "+
			"the token: an editor given a second namespace goes on with the token it has. A running hub applies the "+
			"change within a second; editors of namespaces the token no longer opens are closed.")
	c := node.RegisterClientChange(f)
	if code, ok := parseTokenFlags(f, args, cio); !ok {
		return code
	}
	return node.RunClientChange("hub token", path(), c, f, cio)
}
