package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// backupResult is the backup workload's figures: a hub binary whose store holds storeMiB
// of documents, written to through its admin API by one writer without pause (each write
// answered once it is on disk), first without a backup, then while `hub backup` copies the
// store. The longest write during the backup is the pause a backup causes.
type backupResult struct {
	StoreBytes  int64         `json:"storeBytes"`
	BackupBytes int64         `json:"backupBytes"`
	Namespaces  int           `json:"namespaces"`
	Took        time.Duration `json:"tookNs"`
	Quiet       writeLatency  `json:"withoutBackup"`
	During      writeLatency  `json:"duringBackup"`
	StoreAfter  int64         `json:"storeBytesAfter"`
}

// writeLatency is what the writer saw over a stretch of time.
type writeLatency struct {
	Writes int           `json:"writes"`
	P50    time.Duration `json:"p50Ns"`
	P99    time.Duration `json:"p99Ns"`
	Max    time.Duration `json:"maxNs"`
}

func latencies(ds []time.Duration) writeLatency {
	if len(ds) == 0 {
		return writeLatency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return writeLatency{Writes: len(s), P50: s[len(s)/2], P99: s[len(s)*99/100], Max: s[len(s)-1]}
}

func (w writeLatency) String() string {
	return fmt.Sprintf("%d writes, p50 %v, p99 %v, max %v", w.Writes, w.P50.Round(10*time.Microsecond),
		w.P99.Round(10*time.Microsecond), w.Max.Round(10*time.Microsecond))
}

func (r backupResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backup of a running hub (hub backup through the admin API, checked as it arrives, written to the same disk)\n")
	fmt.Fprintf(&b, "  store file:               %.2f GiB (%d namespaces of 8 MiB of text); %.2f GiB after the backup\n", gib(r.StoreBytes), r.Namespaces, gib(r.StoreAfter))
	fmt.Fprintf(&b, "  backup file:              %.2f GiB\n", gib(r.BackupBytes))
	fmt.Fprintf(&b, "  time:                     %v (%.0f MiB/s)\n", r.Took.Round(10*time.Millisecond), float64(r.BackupBytes)/(1<<20)/r.Took.Seconds())
	fmt.Fprintf(&b, "  admin writes, no backup:  %v\n", r.Quiet)
	fmt.Fprintf(&b, "  admin writes, during it:  %v", r.During)
	return b.String()
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// runBackup fills a hub's store with storeMiB of documents (the hub stopped: through the
// registry, as the hub writes, in documents of 8 MiB of random text), starts the hub binary on it, writes
// through its admin API for a while, then takes a backup with `hub backup` while the writes
// go on. The writes of the quiet time before it are the baseline.
func runBackup(binDir string, storeMiB int, quiet time.Duration) (backupResult, error) {
	var res backupResult
	dir, err := os.MkdirTemp("", "benchrepl-backup-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if binDir == "" {
		binDir = filepath.Join(dir, "bin")
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/hub")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return res, fmt.Errorf("building the hub (run from the repository root, or give -bin): %w", err)
		}
	}
	data := filepath.Join(dir, "hub")
	start := time.Now()
	if res.Namespaces, err = fillStore(data, int64(storeMiB)<<20); err != nil {
		return res, fmt.Errorf("filling the store: %w", err)
	}
	if res.StoreBytes, err = fileSize(filepath.Join(data, persistence.FileName)); err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "backup: store file filled to %.2f GiB in %v\n", gib(res.StoreBytes), time.Since(start).Round(time.Second))

	const token = "bench-admin-token"
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return res, err
	}
	b := &binCluster{dir: dir, hubBin: filepath.Join(binDir, "hub")}
	defer b.stopAll()
	repl, err := freeAddr()
	if err != nil {
		return res, err
	}
	admin, err := freeAddr()
	if err != nil {
		return res, err
	}
	start = time.Now()
	hub, err := b.start(b.hubBin, admin, "hub", "serve", "--listen", repl, "--admin-listen", admin, "--data", data,
		"--client-listen", "off", "--admin-token-file", tokenFile)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "backup: the hub answers after %v (it checks its whole store at start)\n", time.Since(start).Round(time.Second))
	w, err := newAdminWriter(hub.admin, token)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.run(ctx) }()

	time.Sleep(quiet)
	res.Quiet = latencies(w.since(time.Time{}))
	backupFile := filepath.Join(dir, "hub.backup")
	from := time.Now()
	out, err := exec.Command(b.hubBin, "backup", "--admin", hub.admin, "--admin-token-file", tokenFile, "--out", backupFile).CombinedOutput()
	res.Took = time.Since(from)
	if err != nil {
		return res, fmt.Errorf("hub backup: %v\n%s", err, out)
	}
	// The writes that started during the backup, and the one under way when it ended.
	time.Sleep(2 * time.Second)
	cancel()
	if err := <-done; err != nil {
		return res, err
	}
	res.During = latencies(w.between(from, from.Add(res.Took)))
	if res.BackupBytes, err = fileSize(backupFile); err != nil {
		return res, err
	}
	hub.stop()
	res.StoreAfter, err = fileSize(filepath.Join(data, persistence.FileName))
	return res, err
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// fillStore writes documents of 8 MiB of random text (updates of 1 MiB) into a new hub
// store in dir, size bytes of text in all, and returns how many it wrote. (The file is
// larger: the records' framing, the logs compacted into snapshots, the room bbolt keeps.)
func fillStore(dir string, size int64) (int, error) {
	st, err := node.OpenStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return 0, err
	}
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
	if err != nil {
		st.Close(context.Background())
		return 0, err
	}
	ctx := context.Background()
	const doc = 8 << 20
	n := 0
	for written := int64(0); written < size; written += doc {
		c, err := reg.Create(ctx, "default")
		if err != nil {
			return n, errors.Join(err, reg.Close(ctx), st.Close(ctx))
		}
		if err := fillRandomText(ctx, reg, c.NamespaceID, int(min(doc, size-written))); err != nil {
			return n, errors.Join(err, reg.Close(ctx), st.Close(ctx))
		}
		n++
	}
	return n, errors.Join(reg.Close(ctx), st.Close(ctx))
}

// fillRandomText writes n bytes of random hexadecimal text into a namespace in updates of
// 1 MiB.
func fillRandomText(ctx context.Context, reg *registry.Registry, ns string, n int) error {
	l, err := reg.Open(ctx, "default", ns)
	if err != nil {
		return err
	}
	defer l.Release()
	doc := yjs.NewDoc()
	var last []byte
	doc.OnUpdate(func(u []byte, _ any) { last = u })
	text := doc.GetText("body")
	raw := make([]byte, 512<<10)
	for written := 0; written < n; written += 2 * len(raw) {
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		if err := text.Insert(text.Len(), hex.EncodeToString(raw)[:min(2*len(raw), n-written)], nil); err != nil {
			return err
		}
		if _, err := l.WriteLocal(ctx, last); err != nil {
			return err
		}
	}
	return nil
}

// adminWriter writes one key after another into a namespace of its own through the admin
// API, each write answered once it is durable, and keeps when each started and how long it
// took.
type adminWriter struct {
	admin, token, ns string
	doc              *yjs.Doc
	last             []byte

	mu     sync.Mutex // guards starts and took
	starts []time.Time
	took   []time.Duration
}

func newAdminWriter(admin, token string) (*adminWriter, error) {
	w := &adminWriter{admin: admin, token: token, doc: yjs.NewDoc()}
	var c struct{ NamespaceID string }
	body, err := w.call("POST", "/v1/namespaces", nil, 201)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, err
	}
	w.ns = c.NamespaceID
	w.doc.OnUpdate(func(u []byte, _ any) { w.last = u })
	return w, nil
}

func (w *adminWriter) call(method, path string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequest(method, w.admin+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b, nil
}

// run writes until ctx ends; a write that fails ends it with the error.
func (w *adminWriter) run(ctx context.Context) error {
	values := w.doc.GetMap("notes")
	for i := 0; ctx.Err() == nil; i++ {
		if err := values.Set(fmt.Sprintf("k%d", i%1000), float64(i)); err != nil {
			return err
		}
		start := time.Now()
		if _, err := w.call("POST", "/v1/namespaces/"+w.ns+"/update", w.last, 204); err != nil {
			return err
		}
		took := time.Since(start)
		w.mu.Lock()
		w.starts, w.took = append(w.starts, start), append(w.took, took)
		w.mu.Unlock()
	}
	return nil
}

// since returns the durations of the writes started at or after from, and forgets them.
func (w *adminWriter) since(from time.Time) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for i, s := range w.starts {
		if !s.Before(from) {
			out = append(out, w.took[i])
		}
	}
	w.starts, w.took = nil, nil
	return out
}

// between returns the durations of the writes under way at some time in [from, to]: started
// before to and ended after from.
func (w *adminWriter) between(from, to time.Time) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for i, s := range w.starts {
		if s.Before(to) && s.Add(w.took[i]).After(from) {
			out = append(out, w.took[i])
		}
	}
	return out
}
