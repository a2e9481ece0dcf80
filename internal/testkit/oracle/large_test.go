package oracle

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLargeHistoryIsReproducibleAndCached: a small history made twice in two caches is the
// same manifest, byte for byte; asked again, a cache answers without running node; its
// streams decode and agree with the figures.
func TestLargeHistoryIsReproducibleAndCached(t *testing.T) {
	cfg := LargeConfig{Seed: 9, MiB: 0.05, Authors: 2, Updates: 4, RefGC: true}
	var manifests [][]byte
	var first *LargeHistory
	for i := 0; i < 2; i++ {
		t.Setenv(CacheEnv, t.TempDir())
		h := Large(t, cfg)
		b, err := os.ReadFile(filepath.Join(h.Dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, b)
		if first == nil {
			first = h
		}
	}
	if string(manifests[0]) != string(manifests[1]) {
		t.Fatal("the same config made two different histories")
	}

	t.Setenv(CacheEnv, filepath.Dir(first.Dir))
	manifest := filepath.Join(first.Dir, "manifest.json")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(manifest, old, old); err != nil {
		t.Fatal(err)
	}
	h := Large(t, cfg)
	if fi, err := os.Stat(manifest); err != nil || h.Dir != first.Dir || !fi.ModTime().Equal(old) {
		t.Fatalf("asked again, the history was made again (%s, %v)", h.Dir, err)
	}

	f := h.Figures
	if a := h.Stream(t, "a"); len(a) != f.StreamA || len(h.Stream(t, "aV2")) != f.StreamA || len(h.V2ToV1) != f.StreamA {
		t.Fatalf("stream a: %d updates, figures say %d", len(a), f.StreamA)
	}
	if b := h.Stream(t, "b"); len(b) != f.StreamB || len(h.Stream(t, "bV2")) != f.StreamB {
		t.Fatalf("stream b: %d updates, figures say %d", len(b), f.StreamB)
	}
	if len(h.Paths) != 25 || len(h.StateVectors) != len(h.Diffs) || f.Structs == 0 || h.Yjs != "13.6.33" {
		t.Fatalf("%d paths, %d state vectors, %d diffs, %d structs, yjs %s", len(h.Paths), len(h.StateVectors), len(h.Diffs), f.Structs, h.Yjs)
	}
	for _, p := range h.Paths {
		if p.Expect.State.Len == 0 || len(p.Expect.State.SHA256) != 64 || p.Expect.JSON == "" {
			t.Fatalf("path %s/gc=%v: %+v", p.Name, p.GC, p.Expect)
		}
	}
}
