package node

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/node/cli"
)

// The token commands' shared part: `hub token` and `peer token` edit a tokens file (package
// auth) with the same words for editors' client tokens.

// RunClientToken serves `token add|list|remove` for client tokens in the tokens file at
// path (name is "hub token" or "peer token"). The token is printed once, on stdout.
func RunClientToken(name, sub, path string, client string, namespaces StringList, readOnly bool,
	prefix string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s %s: %s\n", name, sub, OneLine(err))
		return 1
	}
	file := TokensFileFlags(path)
	switch sub {
	case "add":
		if len(namespaces) == 0 {
			namespaces = StringList{auth.AllNamespaces}
		}
		tok, err := auth.AddClient(path, auth.ClientGrant{Name: client, Namespaces: namespaces, ReadOnly: readOnly}, nil)
		var existing *auth.ExistingClientError
		if errors.As(err, &existing) {
			return fail(fmt.Errorf("%v: a name has one token; to replace it, remove the old one first (%s remove %s --client %s; "+
				"its editors are closed), then add it again, or pick another name", err, name, file, cli.ShellArg(client)))
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, tok)
		fmt.Fprintf(stderr, "%s add: client token for %s stored in %s (only its SHA-256); the token was printed once, on stdout; editors present it as ?token=… or Authorization: Bearer\n", name, client, path)
		return 0
	case "remove":
		n, err := auth.RemoveClient(path, client, prefix)
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			return fail(fmt.Errorf("no client token of %s matched (%s list %s shows them)", client, name, file))
		}
		fmt.Fprintf(stderr, "%s remove: removed %d client token(s) of %s; a running node closes their editors within a second\n", name, n, client)
		return 0
	}
	return fail(fmt.Errorf("unknown command %q", sub))
}

// TokensFileFlags is how the token commands name the tokens file at path, for a command
// suggested to the operator: --data DIR when it is DIR's tokens file, else --tokens FILE.
func TokensFileFlags(path string) string {
	if filepath.Base(path) == auth.FileName {
		return "--data " + cli.ShellArg(filepath.Dir(path))
	}
	return "--tokens " + cli.ShellArg(path)
}

// ListClientTokens prints the client entries of a tokens file, one per line.
func ListClientTokens(f auth.File, stdout io.Writer) {
	for _, c := range f.Clients {
		perm := "read,write"
		if c.ReadOnly {
			perm = "read-only"
		}
		fmt.Fprintf(stdout, "client:%s\tsha256:%s…\t%s\t%v\n", c.Name, auth.HashPrefix(c.TokenSHA256), perm, c.Namespaces)
	}
}
