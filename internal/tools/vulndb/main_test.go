package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// build lays out the v1 database: the entries by id, as they were, and the three indexes
// with every module an entry names (once per entry), sorted; a file not named by its
// entry's id is refused.
func TestBuild(t *testing.T) {
	osv := t.TempDir()
	entries := map[string]string{
		"GO-2026-0002.json": `{"id":"GO-2026-0002","modified":"2026-03-01T00:00:00Z","aliases":["CVE-2026-2"],
			"affected":[{"package":{"name":"stdlib"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.26.9"}]}]},
			            {"package":{"name":"stdlib"},"ranges":[{"type":"SEMVER","events":[{"introduced":"1.27.0-0"},{"fixed":"1.27.2"}]}]}]}`,
		"GO-2026-0001.json": `{"id":"GO-2026-0001","modified":"2026-05-01T00:00:00Z",
			"affected":[{"package":{"name":"golang.org/x/crypto"}},{"package":{"name":"example.com/a"}}]}`,
	}
	for name, body := range entries {
		if err := os.WriteFile(filepath.Join(osv, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(filepath.Join(out, "stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := build(osv, out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.entries != 2 || sum.modules != 3 {
		t.Errorf("summary %+v, want 2 entries on 3 modules", sum)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, body := range entries {
		if got := read(filepath.Join("ID", name)); got != body {
			t.Errorf("ID/%s is not the entry as it was", name)
		}
	}
	var db struct{ Modified time.Time }
	json.Unmarshal([]byte(read("index/db.json")), &db)
	if !db.Modified.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("db.json: %s", read("index/db.json"))
	}
	wantModules := `[{"path":"example.com/a","vulns":[{"id":"GO-2026-0001","modified":"2026-05-01T00:00:00Z"}]},` +
		`{"path":"golang.org/x/crypto","vulns":[{"id":"GO-2026-0001","modified":"2026-05-01T00:00:00Z"}]},` +
		`{"path":"stdlib","vulns":[{"id":"GO-2026-0002","modified":"2026-03-01T00:00:00Z"}]}]`
	if got := read("index/modules.json"); got != wantModules {
		t.Errorf("modules.json:\n%s\nwant\n%s", got, wantModules)
	}
	wantVulns := `[{"id":"GO-2026-0001","modified":"2026-05-01T00:00:00Z"},{"id":"GO-2026-0002","modified":"2026-03-01T00:00:00Z","aliases":["CVE-2026-2"]}]`
	if got := read("index/vulns.json"); got != wantVulns {
		t.Errorf("vulns.json:\n%s\nwant\n%s", got, wantVulns)
	}
	if _, err := os.Stat(filepath.Join(out, "stale")); !os.IsNotExist(err) {
		t.Error("the folder was not replaced whole")
	}

	os.WriteFile(filepath.Join(osv, "GO-2026-0003.json"), []byte(`{"id":"GO-2026-0004"}`), 0o644)
	if _, err := build(osv, out); err == nil || !strings.Contains(err.Error(), "named by its id") {
		t.Errorf("a file named after another entry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "index", "modules.json")); err != nil {
		t.Error("a failed build touched the folder")
	}
}
