package node

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/node/cli"
)

// The token commands' shared part: `hub token` and `peer token` edit a tokens file (package
// auth) with the same words for editors' client tokens.

// RunClientToken serves `token add|list|remove` for client tokens in the tokens file at
// path (name is "hub token" or "peer token"). The token is printed once, on stdout.
func RunClientToken(name, sub, path string, client string, namespaces StringList, readOnly bool, expires time.Duration,
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
		g := auth.ClientGrant{Name: client, Namespaces: namespaces, ReadOnly: readOnly}
		if expires < 0 {
			return fail(errors.New("--expires must be positive (24h, 90m)"))
		}
		if expires > 0 {
			g.Expires = time.Now().Add(expires)
		}
		tok, err := auth.AddClient(path, g, nil)
		var existing *auth.ExistingClientError
		if errors.As(err, &existing) {
			return fail(fmt.Errorf("%v: a name has one token; to replace it, remove the old one first (%s remove %s --client %s; "+
				"its editors are closed), then add it again, or pick another name", err, name, file, cli.ShellArg(client)))
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, tok)
		until := ""
		if !g.Expires.IsZero() {
			until = "; it expires at " + g.Expires.UTC().Truncate(time.Second).Format(time.RFC3339)
		}
		fmt.Fprintf(stderr, "%s add: client token for %s stored in %s (only its SHA-256); the token was printed once, on stdout; editors present it as ?token=… or Authorization: Bearer%s\n", name, client, path, until)
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
		exp := ""
		switch {
		case c.ExpiresAt.IsZero():
		case time.Now().Before(c.ExpiresAt):
			exp = "\texpires " + c.ExpiresAt.UTC().Format(time.RFC3339)
		default:
			exp = "\texpired " + c.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "client:%s\tsha256:%s…\t%s\t%v%s\n", c.Name, auth.HashPrefix(c.TokenSHA256), perm, c.Namespaces, exp)
	}
}

// ClientChangeFlags are the flags of `token change`: another grant for an editor's client
// token, the token kept.
type ClientChangeFlags struct {
	Client     *string
	Namespaces StringList
	ReadOnly   *bool
	ReadWrite  *bool
}

// RegisterClientChange adds the flags of `token change` to f.
func RegisterClientChange(f *cli.Flags) *ClientChangeFlags {
	c := &ClientChangeFlags{}
	c.Client = f.String("client", "", "the editor's `NAME` (required)")
	f.Var(&c.Namespaces, "namespace", "the `namespace`s the token opens from now on (ns-…, or * for all; repeatable or comma-separated; they replace the old list)")
	c.ReadOnly = f.Bool("read-only", false, "the editor may read but no longer change documents")
	c.ReadWrite = f.Bool("read-write", false, "the editor may change documents again")
	return c
}

// RunClientChange serves `token change`: the client token of an editor gets other
// namespaces or another read-only flag, and keeps its value (the editor needs no new token
// for a second namespace). A running node applies it within a second: a narrowed grant
// closes the editors it no longer covers.
func RunClientChange(name, path string, c *ClientChangeFlags, f *cli.Flags, cio cli.IO) int {
	switch {
	case *c.Client == "":
		return f.Mistake(cio, "--client is required")
	case *c.ReadOnly && *c.ReadWrite:
		return f.Mistake(cio, "give --read-only or --read-write, not both")
	case len(c.Namespaces) == 0 && !*c.ReadOnly && !*c.ReadWrite:
		return f.Mistake(cio, "say what changes: --namespace (repeatable), --read-only or --read-write")
	}
	e, err := auth.UpdateClient(path, *c.Client, func(e *auth.ClientEntry) {
		if len(c.Namespaces) > 0 {
			e.Namespaces = c.Namespaces
		}
		if *c.ReadOnly || *c.ReadWrite {
			e.ReadOnly = *c.ReadOnly
		}
	})
	if err != nil {
		if errors.Is(err, auth.ErrNoToken) {
			err = fmt.Errorf("%v (%s list %s shows them)", err, name, TokensFileFlags(path))
		}
		fmt.Fprintf(cio.Stderr, "%s change: %s\n", name, OneLine(err))
		return 1
	}
	perm := "read,write"
	if e.ReadOnly {
		perm = "read-only"
	}
	fmt.Fprintf(cio.Stderr, "%s change: the client token of %s (sha256:%s…) now opens %v, %s; a running node applies it within a second\n",
		name, e.Name, auth.HashPrefix(e.TokenSHA256), e.Namespaces, perm)
	return 0
}
