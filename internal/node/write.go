package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nomicore/nomicore/internal/envflag"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// RunWrite is the `write` command of both binaries: a small client of the admin API that
// sets keys of a root map of a namespace, for quick starts and scripts. It reads the
// document's state (GET …/update), makes the change on a local copy with a fresh Yjs client
// id, and posts the resulting update (POST …/update), which the server applies through its
// write sequencer and replicates. Values are JSON when they parse as JSON, else strings.
//
//	write --admin-url http://127.0.0.1:8790 --namespace ns-… [--map notes] KEY=VALUE...
func RunWrite(name, defaultAdmin string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name+" write", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin-url", defaultAdmin, "the admin API to write through")
	token := fs.String("admin-token", "", "admin API bearer token, if it requires one")
	ns := fs.String("namespace", "", "the namespace (ns-…)")
	root := fs.String("map", "notes", "the root map to set keys in")
	timeout := fs.Duration("timeout", 30*time.Second, "overall time limit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s write --namespace ns-… [--map ROOT] [--admin-url URL] KEY=VALUE...\n", name)
		fs.PrintDefaults()
	}
	if err := envflag.Apply(fs, getenv); err != nil {
		fmt.Fprintf(stderr, "%s write: %v\n", name, err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if !registry.ValidNamespaceID(*ns) || fs.NArg() == 0 || *root == "" {
		fs.Usage()
		return 2
	}
	type kv struct {
		key   string
		value any
	}
	var sets []kv
	for _, a := range fs.Args() {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "%s write: %q: want KEY=VALUE\n", name, a)
			return 2
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
	base := strings.TrimRight(*admin, "/") + "/v1/namespaces/" + *ns + "/update"
	state, err := call(ctx, http.MethodGet, base, *token, nil)
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
	if _, err := call(ctx, http.MethodPost, base, *token, update); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %d key(s) to %s/%s\n", len(sets), *ns, *root)
	return 0
}

// call does one admin API request and returns the body of a 2xx answer; any other answer is
// an error carrying the API's code and message.
func call(ctx context.Context, method, url, token string, body []byte) ([]byte, error) {
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
	resp, err := http.DefaultClient.Do(req)
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
