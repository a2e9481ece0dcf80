package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
)

// makeStore writes a data dir with two namespaces (one with a compacted snapshot and a
// log), an archived one and a reset one, and closes it.
func makeStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 22, 8, 0, 0, 5, time.UTC)
	create := func(ns, owner string, snapshot []byte, updates ...string) {
		t.Helper()
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns, Owner: owner, CreatedAt: at, Meta: map[string]string{"k": "v"}}, snapshot); err != nil {
			t.Fatal(err)
		}
		var seq uint64
		for _, u := range updates {
			if seq, err = st.Append(owner, ns, []byte(u)); err != nil {
				t.Fatal(err)
			}
		}
		if seq > 0 {
			if err := st.WaitFlushed(ctx, owner, ns, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	create("ns-a", "default", []byte("SNAP"), "u1", "u2")
	create("ns-b", "team", nil, "only")
	create("ns-c", "default", []byte("OLD"), "x")
	if _, err := st.Archive(ctx, "default", "ns-c"); err != nil {
		t.Fatal(err)
	}
	create("ns-d", "default", nil, "r1")
	if _, err := st.Reset(ctx, "default", "ns-d"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestStoreLs(t *testing.T) {
	dir := makeStore(t)
	for _, path := range []string{dir, filepath.Join(dir, persistence.FileName)} {
		code, out, errOut := runCmd(t, "store", "ls", path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var lines []storeLine
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var sl storeLine
			if err := json.Unmarshal([]byte(l), &sl); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			lines = append(lines, sl)
		}
		if len(lines) != 5 {
			t.Fatalf("%d lines:\n%s", len(lines), out)
		}
		a, b, c, archC, archD := lines[0], lines[1], lines[2], lines[3], lines[4]
		if a.NamespaceID != "ns-a" || a.State != "active" || !a.HasDoc || a.SnapshotBytes != 4 || a.LogUpdates != 2 || a.LogBytes != 4 ||
			a.Through != 2 || a.CreatedAt != "2026-09-22T08:00:00.000000005Z" || a.Meta["k"] != "v" {
			t.Fatalf("ns-a: %+v", a)
		}
		if b.Owner != "team" || b.LogUpdates != 1 {
			t.Fatalf("ns-b: %+v", b)
		}
		if c.NamespaceID != "ns-c" || c.State != "archived" || c.HasDoc || c.Archive != 0 {
			t.Fatalf("ns-c: %+v", c)
		}
		if archC.NamespaceID != "ns-c" || archC.Archive != 1 || archC.Reason != "archive" || archC.State != "active" || !archC.HasDoc || archC.SnapshotBytes != 3 || archC.LogUpdates != 1 {
			t.Fatalf("archive of ns-c: %+v", archC)
		}
		if archD.NamespaceID != "ns-d" || archD.Archive != 1 || archD.Reason != "reset" || archD.LogUpdates != 1 {
			t.Fatalf("archive of ns-d: %+v", archD)
		}
	}
}

func hexLines(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(hex.EncodeToString([]byte(p)) + "\n")
	}
	return b.String()
}

func TestStoreExport(t *testing.T) {
	dir := makeStore(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ns-a"}, hexLines("SNAP", "u1", "u2")},
		{[]string{"ns-b"}, hexLines("only")}, // an empty snapshot prints no line
		{[]string{"ns-c", "--archive", "1"}, hexLines("OLD", "x")},
		{[]string{"--archive=1", "ns-d"}, hexLines("r1")},
		{[]string{"ns-a", "--owner", "default"}, hexLines("SNAP", "u1", "u2")},
	}
	for _, c := range cases {
		code, out, errOut := runCmd(t, append([]string{"store", "export", dir}, c.args...)...)
		if code != 0 || out != c.want {
			t.Fatalf("export %v: exit %d, %q (stderr %q), want %q", c.args, code, out, errOut, c.want)
		}
	}
	for _, args := range [][]string{{"ns-c"}, {"ns-zz"}, {"ns-c", "--archive", "2"}, {"ns-a", "--owner", "team"}} {
		code, out, errOut := runCmd(t, append([]string{"store", "export", dir}, args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "no ") {
			t.Fatalf("export %v: exit %d, %q, stderr %q; want exit 1 and a reason", args, code, out, errOut)
		}
		if args[0] != "ns-zz" && !strings.Contains(errOut, "nmcr store ls "+dir+" lists") {
			t.Fatalf("export %v: %q does not give the command that lists the store", args, errOut)
		}
	}
}

func TestStoreErrors(t *testing.T) {
	dir := makeStore(t)
	for _, args := range [][]string{{"store"}, {"store", "rm", dir}, {"store", "ls"}, {"store", "export", dir}, {"store", "ls", dir, "--bogus"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	// A store in use by a running instance.
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "store", "ls", dir)
	st.Close(context.Background())
	if code != 1 || !strings.Contains(errOut, "in use by a running hub or peer") || !strings.Contains(errOut, "/v1/namespaces/<NAMESPACE>/update | nmcr doc json") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("locked store: exit %d, %q", code, errOut)
	}
	// A damaged file.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, bytes.Repeat([]byte{0xAB}, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "store", "ls", bad)
	if code != 1 || !strings.Contains(errOut, bad) {
		t.Fatalf("damaged store: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "store", "ls", filepath.Join(dir, "missing.db"))
	if code != 1 || !strings.Contains(errOut, "missing.db") {
		t.Fatalf("missing store: exit %d, %q", code, errOut)
	}
}
