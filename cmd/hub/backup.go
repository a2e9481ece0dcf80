package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/tlsconf"
)

// backupCommand is `hub backup`: it takes a backup of a running hub through its admin API
// (GET /v1/backup) and checks it as it arrives.
func backupCommand(args []string, cio cli.IO) int {
	f := cli.NewFlags("hub backup", "hub backup --out FILE [--admin URL] [--admin-token-file FILE]",
		"Takes a backup of a running hub through its admin API, while the hub keeps serving: a consistent copy of its "+
			"store (of a hub cluster: the cluster's namespaces, logs and snapshots, from any node) and its tokens file. "+
			"The backup is checked as it arrives (its checksum); FILE appears only once it is whole and checked (- "+
			"writes to stdout instead: then only the exit status says it is whole). The hub serves backups only when "+
			"its admin API requires a token. hub restore prepares a data directory from the file.")
	var admin string
	f.StringVar(&admin, "admin", "http://127.0.0.1:8788", "the hub's admin API, http://HOST:PORT (https://… when it serves TLS)")
	f.StringVar(&admin, "admin-url", "http://127.0.0.1:8788", "`URL`: the same as --admin")
	out := f.String("out", "", "the backup `FILE` to write (- for stdout); it must not exist")
	token := f.String("admin-token", "", "the admin API's bearer `TOKEN` (or NOMICORE_ADMIN_TOKEN; prefer --admin-token-file)")
	tokenFile := f.String("admin-token-file", "", "`FILE` holding the admin API's bearer token")
	caFile := f.String("ca-file", "", "`FILE` of PEM certificates (CAs) to trust for an https:// admin URL (default: the system's)")
	timeout := f.Duration("timeout", 0, "give up after this long (0: no limit; a large store takes a while)")
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	switch {
	case len(operands) > 0:
		return f.Mistake(cio, "unexpected argument %q", operands[0])
	case *out == "":
		return f.Mistake(cio, "--out FILE is required")
	}
	fail := func(err error) int {
		fmt.Fprintf(cio.Stderr, "hub backup: %s\n", node.OneLine(err))
		return 1
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fail(fmt.Errorf("--admin-token-file: %v", err))
		}
		*token = strings.TrimSpace(string(b))
	}
	if *token == "" {
		return fail(fmt.Errorf("no admin token: a hub serves backups only with one; give --admin-token-file FILE (the file the hub's --admin-token-file names) or set NOMICORE_ADMIN_TOKEN"))
	}
	ca, err := tlsconf.NewCAFile(*caFile)
	if err != nil {
		return fail(fmt.Errorf("--ca-file: %v", err))
	}
	pool, _, _ := ca.Pool()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsconf.ClientConfig(pool), Proxy: http.ProxyFromEnvironment}}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}

	// Where the bytes go: stdout, or a temporary file beside FILE renamed once checked.
	var dst io.Writer = cio.Stdout
	var file *os.File
	tmp := ""
	if *out != "-" {
		if _, err := os.Stat(*out); err == nil {
			return fail(fmt.Errorf("%s exists: give a new file (a backup never overwrites one)", *out))
		}
		tmp = filepath.Join(filepath.Dir(*out), "."+filepath.Base(*out)+".partial")
		if file, err = os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return fail(err)
		}
		defer func() {
			if file != nil {
				file.Close()
				os.Remove(tmp)
			}
		}()
		dst = file
	}
	url := strings.TrimRight(admin, "/") + "/v1/backup"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(apiError(resp))
	}
	counted := &countingReader{r: resp.Body}
	h, err := backup.Verify(io.TeeReader(counted, dst))
	if err != nil {
		return fail(fmt.Errorf("the backup from %s is not whole: %v (nothing was kept; take it again)", url, err))
	}
	took := time.Since(start)
	where := "stdout"
	if file != nil {
		if err := file.Sync(); err != nil {
			return fail(err)
		}
		if err := file.Close(); err != nil {
			return fail(err)
		}
		file = nil
		if err := os.Rename(tmp, *out); err != nil {
			os.Remove(tmp)
			return fail(err)
		}
		where = *out
	}
	what := "hub " + h.InstanceID
	if h.Kind == backup.KindHubCluster {
		what = fmt.Sprintf("hub cluster %s (from node %s)", h.InstanceID, h.Node)
	}
	fmt.Fprintf(cio.Stderr, "hub backup: %s as of %s: %d bytes in %v, checked, written to %s\n",
		what, h.CreatedAt.Format(time.RFC3339), counted.n, took.Round(time.Millisecond), where)
	return 0
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// apiError is an admin API error answer as one error.
func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return fmt.Errorf("%s: %s %s", resp.Request.URL, resp.Status, strings.TrimSpace(string(b)))
}

// restoreCommand is `hub restore`: it prepares a data directory from a backup.
func restoreCommand(args []string, cio cli.IO) int {
	f := cli.NewFlags("hub restore", "hub restore --from FILE --data DIR [--restore-fence]",
		"Prepares the data directory DIR from a backup that hub backup wrote, for hub serve --data DIR. The backup is "+
			"checked whole first (its checksum; a single hub's store record by record): a damaged, cut or foreign file is "+
			"refused, and nothing is written. DIR must not hold a store. Peers that reconnect to the restored hub "+
			"merge what they wrote since the backup back into it; namespaces created after the backup are unknown to "+
			"it (its log says what to do when a peer asks for one). With --restore-fence every namespace's epoch is "+
			"raised instead: peers are fenced and reset their replicas, discarding what they wrote since the backup. "+
			"A hub cluster's backup is loaded by the node started on DIR into a new, empty cluster.")
	from := f.String("from", "", "the backup `FILE` (required)")
	data := f.String("data", "", "the data `DIR` to prepare (required; created if needed, and it must not hold a store)")
	fence := f.Bool("restore-fence", false, "raise every namespace's epoch: peers are fenced (conflicted) and reset, instead of merging what they wrote since the backup")
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	switch {
	case len(operands) > 0:
		return f.Mistake(cio, "unexpected argument %q", operands[0])
	case *from == "":
		return f.Mistake(cio, "--from FILE is required")
	case *data == "":
		return f.Mistake(cio, "--data DIR is required")
	}
	log := node.NewLogger(cio.Stderr, "warn", "text", "hub")
	clk := clock.Real()
	start := clk.Now()
	note, err := node.Restore(context.Background(), node.RestoreOptions{From: *from, Data: *data, Fence: *fence, Clock: clk, Log: log})
	if err != nil {
		fmt.Fprintf(cio.Stderr, "hub restore: %s\n", node.OneLine(err))
		return 1
	}
	w := cio.Stdout
	fmt.Fprintf(w, "restored %s into %s: %d namespaces, as of %s (%v)\n", *from, *data, note.Namespaces,
		note.BackupCreatedAt.Format(time.RFC3339), clk.Now().Sub(start).Round(time.Millisecond))
	switch {
	case note.Pending:
		fmt.Fprintf(w, "next: start a node of a new cluster (empty data directories on every node) with --data %s and --instance-id %s: "+
			"it loads the backup into the cluster once the cluster has quorum, then serves\n", *data, note.InstanceID)
	default:
		fmt.Fprintf(w, "next: hub serve --data %s --instance-id %s (the instance id peers expect)\n", *data, note.InstanceID)
	}
	if note.Fence {
		fmt.Fprintln(w, "every namespace's epoch is raised: peers that reconnect are fenced (their targets conflicted) and reset their replicas")
	} else {
		fmt.Fprintln(w, "peers that reconnect merge what they wrote since the backup back into the hub; namespaces created since are reported in the hub's log")
	}
	return 0
}
