package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupWorkloadSmall runs the backup workload (the hub binary, built by it) on a
// 16 MiB store with a second of writes before the backup, so the harness keeps working:
// the figures are checked for consistency, not speed.
func TestBackupWorkloadSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hub")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(wd, "..", "..")) // the repository root, where runBackup builds
	r, err := runBackup("", 16, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.StoreBytes < 16<<20 || r.Namespaces != 2 || r.BackupBytes < r.StoreBytes/2 || r.BackupBytes > r.StoreAfter+1<<20 ||
		r.Took <= 0 || r.Quiet.Writes == 0 || r.Quiet.Max < r.Quiet.P99 || r.Quiet.P99 < r.Quiet.P50 || r.During.Max < r.During.P99 {
		t.Fatalf("backup %+v", r)
	}
	if s := r.String(); !strings.HasPrefix(s, "backup of a running hub") || strings.Contains(s, "%!") {
		t.Fatalf("report %q", s)
	}
}
