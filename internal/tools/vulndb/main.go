// Command vulndb lays out the Go vulnerability database in a folder, for
// `govulncheck -db file://FOLDER`, from the golang.org/x/vulndb module — the database's
// entries in the OSV format, under data/osv — which the Go module proxy serves. `make lint`
// runs it so that govulncheck needs no access to vuln.go.dev.
//
// Usage:
//
//	go run ./internal/tools/vulndb [-version latest] -out FOLDER
//
// It fetches the module with `go mod download` (module cache, GOPROXY and the checksum
// database apply as for any module) and writes FOLDER in the database's v1 layout
// (https://go.dev/security/vulndb#protocol):
//
//	index/db.json       {"modified": the latest entry's modification time}
//	index/modules.json  [{"path": module, "vulns": [{"id", "modified"}]}], by path
//	index/vulns.json    [{"id", "modified", "aliases"}], by id
//	ID/{id}.json        each entry, as the module holds it
//
// The module index leaves out the optional "fixed" version of each vulnerability: it only
// lets a client skip reading entries, and without it govulncheck reads every entry of a
// module it uses and checks the entry's own version ranges. FOLDER is replaced whole.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const module = "golang.org/x/vulndb"

func main() {
	version := flag.String("version", "latest", "the `VERSION` of "+module+" to build the database from (latest, or a pseudo-version to pin it)")
	out := flag.String("out", "", "the `FOLDER` to write the database to (replaced whole)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: vulndb [-version VERSION] -out FOLDER")
		os.Exit(2)
	}
	dir, resolved, err := download(*version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
	db, err := build(filepath.Join(dir, "data", "osv"), *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
	fmt.Printf("vulnerability database: %s@%s, %d entries on %d modules, in %s\n", module, resolved, db.entries, db.modules, *out)
}

// download fetches the module at version into the module cache and returns its folder and
// the version it resolved to.
func download(version string) (dir, resolved string, err error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: nothing to add to a go.mod
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	var m struct{ Dir, Version, Error string }
	if jerr := json.Unmarshal(b, &m); jerr == nil && m.Error != "" {
		return "", "", fmt.Errorf("go mod download %s@%s: %s", module, version, m.Error)
	}
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s@%s: %v: %s", module, version, err, strings.TrimSpace(stderr.String()))
	}
	if m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s@%s named no folder", module, version)
	}
	return m.Dir, m.Version, nil
}

// entry holds the fields of an OSV entry the indexes are made of.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

type (
	dbMeta struct {
		Modified time.Time `json:"modified"`
	}
	moduleVuln struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
	}
	moduleMeta struct {
		Path  string       `json:"path"`
		Vulns []moduleVuln `json:"vulns"`
	}
	vulnMeta struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
		Aliases  []string  `json:"aliases,omitempty"`
	}
)

type summary struct{ entries, modules int }

// build writes the database of the OSV entries in osvDir (one file per entry, named by its
// id) to out.
func build(osvDir, out string) (summary, error) {
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil {
		return summary{}, err
	}
	if len(files) == 0 {
		return summary{}, fmt.Errorf("no OSV entries in %s", osvDir)
	}
	parent := filepath.Dir(filepath.Clean(out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return summary{}, err
	}
	tmp, err := os.MkdirTemp(parent, ".vulndb-")
	if err != nil {
		return summary{}, err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, "ID"), 0o755); err != nil {
		return summary{}, err
	}
	var db dbMeta
	modules := map[string]*moduleMeta{}
	var vulns []vulnMeta
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return summary{}, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return summary{}, fmt.Errorf("%s: %v", f, err)
		}
		if e.ID == "" || filepath.Base(f) != e.ID+".json" {
			return summary{}, fmt.Errorf("%s: holds entry %q; want one file per entry, named by its id", f, e.ID)
		}
		if e.Modified.After(db.Modified) {
			db.Modified = e.Modified
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		seen := map[string]bool{}
		for _, a := range e.Affected {
			path := a.Package.Name
			if path == "" || seen[path] {
				continue
			}
			seen[path] = true
			m := modules[path]
			if m == nil {
				m = &moduleMeta{Path: path}
				modules[path] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
		if err := os.WriteFile(filepath.Join(tmp, "ID", e.ID+".json"), b, 0o644); err != nil {
			return summary{}, err
		}
	}
	mods := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		slices.SortFunc(m.Vulns, func(a, b moduleVuln) int { return strings.Compare(a.ID, b.ID) })
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b *moduleMeta) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(vulns, func(a, b vulnMeta) int { return strings.Compare(a.ID, b.ID) })
	if err := os.MkdirAll(filepath.Join(tmp, "index"), 0o755); err != nil {
		return summary{}, err
	}
	for name, v := range map[string]any{"db.json": db, "modules.json": mods, "vulns.json": vulns} {
		b, err := json.Marshal(v)
		if err != nil {
			return summary{}, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "index", name), b, 0o644); err != nil {
			return summary{}, err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return summary{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return summary{}, errors.Join(err, os.RemoveAll(tmp))
	}
	return summary{entries: len(vulns), modules: len(mods)}, nil
}
