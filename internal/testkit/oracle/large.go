package oracle

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Large histories: testdata/oracle/largehist.mjs makes a multi-author history of many MiB
// with JS yjs and writes it, with everything JS yjs computes from it along every path the Go
// tests take, to a directory (its header comment says what is in it). Making one takes from
// seconds to minutes, so the directories are kept in a cache under the system's temporary
// directory, keyed by the script, the installed package lock and the configuration: a second
// run with the same configuration only reads them.

// CacheEnv names the environment variable that moves the cache of large histories (default:
// nomicore-yjs-histories under the system's temporary directory).
const CacheEnv = "NOMICORE_YJS_HISTORY_CACHE"

// LargeConfig is a large history to make with largehist.mjs.
type LargeConfig struct {
	Seed    uint64  `json:"seed"`
	MiB     float64 `json:"mib"`     // the size of the history's encoded state
	Authors int     `json:"authors"` // editing clients
	Updates int     `json:"updates"` // about how many consecutive updates stream a has
	RefGC   bool    `json:"refGC"`   // the reference document that makes stream a collects garbage
	// Keep stores every expected byte string, not only its hash (for looking into a
	// difference; the cache entry is then several times larger).
	Keep bool `json:"keep,omitempty"`
}

// Expected is a byte string JS computed, known by its SHA-256 (hex) and length.
type Expected struct {
	SHA256 string `json:"sha256"`
	Len    int    `json:"len"`
}

// LargeInput says what a path applies.
type LargeInput struct {
	Stream string `json:"stream,omitempty"` // "a", "aV2", "b" or "bV2": its updates, one by one
	Order  []int  `json:"order,omitempty"`  // the updates in this order (indices), else as they are
	Prefix int    `json:"prefix,omitempty"` // with Diff: only the first Prefix updates of Stream,
	Diff   *int   `json:"diff,omitempty"`   // then diffUpdate(merge of a, StateVectors[Diff])
	Merge  string `json:"merge,omitempty"`  // "a": mergeUpdates of the stream (in Order), applied once
	Blob   string `json:"blob,omitempty"`   // one update, applied once
	V2     bool   `json:"v2,omitempty"`     // Blob is in format v2
}

// LargeResult is what JS yjs has after a path.
type LargeResult struct {
	JSON        string     `json:"json"` // blob: the roots' JSON view, keys sorted
	StateVector Expected   `json:"stateVector"`
	State       Expected   `json:"state"` // encodeStateAsUpdate
	Pending     bool       `json:"pending"`
	Diffs       []Expected `json:"diffs"` // encodeStateAsUpdate against each of StateVectors
}

// LargeMid is what JS yjs has partway through a path: after the first After updates.
type LargeMid struct {
	After       int      `json:"after"`
	StateVector Expected `json:"stateVector"`
	State       Expected `json:"state"`
	Pending     bool     `json:"pending"`
}

// LargePath is one way of delivering the history to a fresh document.
type LargePath struct {
	Name   string      `json:"name"`
	GC     bool        `json:"gc"`
	Input  LargeInput  `json:"input"`
	Mid    *LargeMid   `json:"mid"`
	Expect LargeResult `json:"expect"`
}

// LargeHistory is a large history read from its directory.
type LargeHistory struct {
	Dir     string
	Config  LargeConfig         `json:"config"`
	Yjs     string              `json:"yjs"`
	Authors []uint32            `json:"authors"`
	Roots   map[string]RootType `json:"roots"`
	Figures struct {
		Rounds           int            `json:"rounds"`
		StateBytes       int            `json:"stateBytes"`
		TextLength       int            `json:"textLength"`
		RichLength       int            `json:"richLength"`
		MapKeys          int            `json:"mapKeys"`
		ListLength       int            `json:"listLength"`
		Structs          int            `json:"structs"`
		StructsPerClient map[string]int `json:"structsPerClient"`
		StreamA          int            `json:"streamA"`
		StreamABytes     int            `json:"streamABytes"`
		StreamAMaxBytes  int            `json:"streamAMaxBytes"`
		StreamB          int            `json:"streamB"`
		StreamBBytes     int            `json:"streamBBytes"`
	} `json:"figures"`
	Streams      map[string]string `json:"streams"`      // stream name → blob of frames
	StateVectors []string          `json:"stateVectors"` // blobs
	Merged       Expected          `json:"merged"`       // mergeUpdates(a)
	MergedShuf   Expected          `json:"mergedShuffled"`
	Diffs        []Expected        `json:"diffs"` // diffUpdate(merged, StateVectors[i])
	SVFromMerged Expected          `json:"svFromMerged"`
	V2ToV1       []Expected        `json:"v2ToV1"` // convertUpdateFormatV2ToV1 of each update of aV2
	Paths        []LargePath       `json:"paths"`
}

// Blob reads a byte string of the history.
func (h *LargeHistory) Blob(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, "blobs", name))
	if err != nil {
		tb.Fatalf("large history: %v", err)
	}
	return b
}

// Stream reads the updates of a stream ("a", "aV2", "b", "bV2").
func (h *LargeHistory) Stream(tb testing.TB, name string) [][]byte {
	tb.Helper()
	blob, ok := h.Streams[name]
	if !ok {
		tb.Fatalf("large history: no stream %q", name)
	}
	b := h.Blob(tb, blob)
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 || uint64(len(b)-4) < uint64(binary.LittleEndian.Uint32(b)) {
			tb.Fatalf("large history: stream %s is truncated", name)
		}
		n := int(binary.LittleEndian.Uint32(b))
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// Check compares got with an expected byte string. On a difference it writes got next to the
// history (and says where it differs first when the expected bytes were kept).
func (h *LargeHistory) Check(tb testing.TB, what string, got []byte, want Expected) {
	tb.Helper()
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) == want.SHA256 && len(got) == want.Len {
		return
	}
	msg := fmt.Sprintf("%s: ours %d bytes, JS %d bytes (sha256 %.16s…)", what, len(got), want.Len, want.SHA256)
	if js, err := os.ReadFile(filepath.Join(h.Dir, "blobs", want.SHA256[:32])); err == nil {
		i := 0
		for i < len(got) && i < len(js) && got[i] == js[i] {
			i++
		}
		msg += fmt.Sprintf("; first difference at byte %d", i)
	} else {
		msg += "; make the history with Keep to compare the bytes"
	}
	name := filepath.Join(h.Dir, "ours-"+hex.EncodeToString(sum[:8]))
	if err := os.WriteFile(name, got, 0o644); err == nil {
		msg += "; ours is in " + name
	}
	tb.Error(msg)
}

// Large returns the large history of cfg, making it with node unless the cache holds it.
// Without node or the npm packages the test is skipped, or fails under
// NOMICORE_REQUIRE_ORACLE=1, as with Start.
func Large(tb testing.TB, cfg LargeConfig) *LargeHistory {
	tb.Helper()
	dir, missing := locate()
	if missing != "" {
		notInstalled(tb, missing)
		return nil
	}
	script := filepath.Join(dir, "largehist.mjs")
	key := sha256.New()
	for _, f := range []string{script, filepath.Join(dir, "node_modules", ".package-lock.json"), filepath.Join(dir, "node_modules", "yjs", "package.json")} {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatalf("large history: %v", err)
		}
		key.Write(b)
	}
	args, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	key.Write(args)
	cache := os.Getenv(CacheEnv)
	if cache == "" {
		cache = filepath.Join(os.TempDir(), "nomicore-yjs-histories")
	}
	out := filepath.Join(cache, hex.EncodeToString(key.Sum(nil))[:24])
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err != nil {
		if err := makeLarge(tb, dir, script, string(args), cache, out); err != nil {
			tb.Fatalf("large history %s: %v", args, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		tb.Fatalf("large history: %v", err)
	}
	h := &LargeHistory{Dir: out}
	if err := json.Unmarshal(raw, h); err != nil {
		tb.Fatalf("large history %s: manifest.json: %v", out, err)
	}
	return h
}

// makeLarge runs largehist.mjs into a fresh directory of the cache and renames it to out. A
// concurrent run that made out first wins; ours is dropped.
func makeLarge(tb testing.TB, dir, script, args, cache, out string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	var tag [6]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return err
	}
	tmp := out + ".new-" + hex.EncodeToString(tag[:])
	ctx := context.Background()
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
			defer cancel()
		}
	}
	start := time.Now()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", script, args, tmp)
	cmd.Dir = dir
	cmd.Stderr = &stderr
	err := cmd.Run()
	defer os.RemoveAll(tmp)
	defer os.RemoveAll(tmp + ".tmp-" + fmt.Sprint(cmdPID(cmd)))
	if err != nil {
		return fmt.Errorf("node largehist.mjs: %v\n%s", err, lastBytes(stderr.Bytes(), 4096))
	}
	tb.Logf("made the large history %s in %v: %s", args, time.Since(start).Round(time.Second), bytes.TrimSpace(lastBytes(stderr.Bytes(), 1024)))
	if err := os.Rename(tmp, out); err != nil {
		if _, serr := os.Stat(filepath.Join(out, "manifest.json")); serr == nil {
			return nil // another run made it meanwhile
		}
		return err
	}
	return nil
}

func cmdPID(cmd *exec.Cmd) int {
	if cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
