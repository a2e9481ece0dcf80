package hocuspocus

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed golden frames are exactly what e2e/hocuspocus/golden.mjs writes with the
// pinned packages (e2e/hocuspocus/v3 and v4, package-lock.json): a changed pin without
// regenerated frames (make golden) fails here.
func TestGoldenFramesAreUpToDate(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "e2e", "hocuspocus"))
	_, errNode := exec.LookPath("node")
	var errMods error
	for _, v := range []string{"v3", "v4"} {
		if _, err := os.Stat(filepath.Join(dir, v, "node_modules", "@hocuspocus", "provider", "package.json")); err != nil {
			errMods = err
		}
	}
	if errNode != nil || errMods != nil {
		msg := "the Hocuspocus packages are not installed (make js-deps): node: " + errorText(errNode) + "; packages: " + errorText(errMods)
		if os.Getenv("NOMICORE_REQUIRE_ORACLE") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg)
	}
	cmd := exec.Command("node", "golden.mjs")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	fresh, err := cmd.Output()
	if err != nil {
		t.Fatalf("golden.mjs: %v\n%s", err, stderr.Bytes())
	}
	committed, err := os.ReadFile(filepath.Join("testdata", "frames.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatal("testdata/frames.json differs from what e2e/hocuspocus/golden.mjs writes now: run make golden and commit it")
	}
}

func errorText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
