package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// nmcr store check on a damaged store: each problem with where it is and what to do, then
// the documents that still load; exit status 1. A sound store is checked as before.
func TestStoreCheckReportsDamage(t *testing.T) {
	dir := makeStore(t) // its documents are not Yjs: UNREADABLE, but the store is sound
	if code, out, errs := runNmcr(t, "", nil, "store", "check", dir); strings.Contains(out, "DAMAGED") || !strings.Contains(out, "ns-a, owner default: UNREADABLE") {
		t.Fatalf("a sound store: exit %d\n%s%s", code, out, errs)
	}
	file := filepath.Join(dir, persistence.FileName)
	if err := persistencetest.FlipIn(file, []byte("u2")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runNmcr(t, "", nil, "store", "check", dir)
	if code != 1 || !strings.Contains(out, file+": DAMAGED at docs/default/ns-a/log/2") || !strings.Contains(out, "checksum") ||
		!strings.Contains(out, "hub restore --from BACKUP") || !strings.Contains(out, "--rebuild-damaged-store") {
		t.Fatalf("a damaged record: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "ns-a, owner default: UNREADABLE\n  it does not load from the damaged store: store file") || !strings.Contains(out, "ns-b, owner team:") {
		t.Fatalf("the documents after the damage:\n%s", out)
	}

	code, out, _ = runNmcr(t, "", nil, "store", "check", dir, "--json")
	var first damageLine
	if code != 1 || json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first) != nil ||
		first.Verdict != "damaged" || first.File != file || first.Where != "docs/default/ns-a/log/2" || first.Fix == "" {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}

	// Damaged past opening: the file as a whole.
	if err := persistencetest.Truncate(file, 100); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runNmcr(t, "", nil, "store", "check", dir)
	if code != 1 || !strings.Contains(out, file+": DAMAGED at the file as a whole") {
		t.Fatalf("a file cut to 100 bytes: exit %d\n%s%s", code, out, errs)
	}
}
