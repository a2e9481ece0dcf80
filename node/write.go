package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// WriteCommand is the `write` command of both binaries: a small client of the admin API that
// sets keys of a root map of a namespace, for quick starts and scripts. It reads the
// document's state (GET …/update), makes the change on a local copy with a fresh Yjs client
// id, and posts the resulting update (POST …/update), which the server applies through its
// write sequencer and replicates. Values are JSON when they parse as JSON, else strings.
//
//	write --admin-url http://127.0.0.1:8790 --namespace ns-… [--map notes] KEY=VALUE...
func WriteCommand(prog, defaultAdmin string) cli.Command {
	return cli.Command{Name: "write", Summary: "set keys of a namespace's root map through the admin API (for scripts and the walkthrough)",
		Run: func(args []string, io cli.IO) int { return runWrite(prog, defaultAdmin, args, io) }}
}

func runWrite(prog, defaultAdmin string, args []string, cio cli.IO) int {
	f := cli.NewFlags(prog+" write", prog+" write --namespace ns-… [--map ROOT] [--admin-url URL] KEY=VALUE...",
		"Sets KEY to VALUE in the root map ROOT of a namespace, through the admin API at URL: the change is applied "+
			"like any other local write and replicates. A VALUE that parses as JSON is stored as that JSON value "+
			"(42, true, {\"a\":1}), anything else as a string.")
	admin := f.String("admin-url", defaultAdmin, "the admin API to write through, http://HOST:PORT (https://… when it serves TLS)")
	caFile := f.String("ca-file", "", "`FILE` of PEM certificates (CAs) to trust for an https:// admin URL (default: the system's)")
	token := f.String("admin-token", "", "the admin API's bearer token, if it requires one (or NOMICORE_ADMIN_TOKEN)")
	ns := f.String("namespace", "", "the `namespace` to write to, ns- and 32 hex digits (required)")
	root := f.String("map", "notes", "the root map to set keys in, by `NAME`")
	timeout := f.Duration("timeout", 30*time.Second, "give up after this long")
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	switch {
	case *ns == "":
		return f.Mistake(cio, "--namespace is required")
	case !registry.ValidNamespaceID(*ns):
		return f.Mistake(cio, "--namespace %q is not a namespace id (want ns- and 32 lowercase hex digits)", *ns)
	case *root == "":
		return f.Mistake(cio, "--map must name a root map")
	case len(operands) == 0:
		return f.Mistake(cio, "nothing to write: give one or more KEY=VALUE")
	}
	name, stdout, stderr := prog, cio.Stdout, cio.Stderr
	type kv struct {
		key   string
		value any
	}
	var sets []kv
	for _, a := range operands {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return f.Mistake(cio, "%q is not KEY=VALUE", a)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		sets = append(sets, kv{k, val})
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s write: %v\n", name, err)
		return 1
	}
	ca, err := tlsconf.NewCAFile(*caFile)
	if err != nil {
		return fail(fmt.Errorf("--ca-file: %v", err))
	}
	pool, _, _ := ca.Pool()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsconf.ClientConfig(pool), Proxy: http.ProxyFromEnvironment}}
	defer client.CloseIdleConnections()
	base := strings.TrimRight(*admin, "/") + "/v1/namespaces/" + *ns + "/update"
	state, err := call(ctx, client, http.MethodGet, base, *token, nil)
	if err != nil {
		return fail(err)
	}
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return fail(fmt.Errorf("the document state does not decode: %v", err))
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	var setErr error
	m := doc.GetMap(*root)
	doc.Transact(nil, func(*yjs.Transaction) {
		for _, s := range sets {
			if err := m.Set(s.key, s.value); err != nil && setErr == nil {
				setErr = fmt.Errorf("setting %q: %v", s.key, err)
			}
		}
	})
	unsub()
	if setErr != nil {
		return fail(setErr)
	}
	if update == nil {
		return fail(errors.New("the change produced no update"))
	}
	if _, err := call(ctx, client, http.MethodPost, base, *token, update); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %d key(s) to %s/%s\n", len(sets), *ns, *root)
	return 0
}

// call does one admin API request and returns the body of a 2xx answer; any other answer is
// an error carrying the API's code and message.
func call(ctx context.Context, client *http.Client, method, url, token string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Code, Message string }
		if json.Unmarshal(out, &e) == nil && e.Code != "" {
			return nil, fmt.Errorf("%s %s: %d %s: %s", method, url, resp.StatusCode, e.Code, e.Message)
		}
		return nil, fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return out, nil
}
