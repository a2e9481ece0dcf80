package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// fragmentedText returns the state of a document whose text "text" is n inserts of two
// characters by client 7, each at the start (so each is a struct of its own: struct k holds
// clocks 2k and 2k+1).
func fragmentedText(t *testing.T, n int) []byte {
	t.Helper()
	d := yjs.NewDoc(yjs.WithClientID(7))
	txt := d.GetText("text")
	for k := 0; k < n; k++ {
		if err := txt.Insert(0, "ab", nil); err != nil {
			t.Fatal(err)
		}
	}
	st, err := yjs.EncodeStateAsUpdate(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// deletion is an update that deletes [clock, clock+n) of client 7 and holds nothing else.
func deletion(clock, n uint64) []byte {
	e := lib0.NewEncoder(16)
	for _, v := range []uint64{0, 1, 7, 1, clock, n} {
		e.WriteVarUint(v)
	}
	return e.Bytes()
}

// makeCheckStore writes a data dir of namespaces in every situation nmcr store check tells
// apart and closes it. Text of 600 structs: the first 512 fill a chunk of the core's struct
// list; a deletion from struct 400 on splits struct 401, and with it the full chunk, which
// older versions got wrong (they also deleted structs 256 to 399: 288 characters).
func makeCheckStore(t *testing.T, bad bool) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	large := fragmentedText(t, 600)
	small := fragmentedText(t, 20)
	at := time.Date(2026, 9, 22, 8, 0, 0, 0, time.UTC)
	create := func(ns string, snapshot []byte, updates ...[]byte) uint64 {
		t.Helper()
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns, Owner: "default", CreatedAt: at}, snapshot); err != nil {
			t.Fatal(err)
		}
		return appendAll(t, st, ns, updates...)
	}
	create("ns-small", small, deletion(10, 3))
	create("ns-served", nil, large, deletion(800, 3))
	create("ns-clean", nil, large, deletion(200, 3))
	seq := create("ns-folded", nil, large)
	if err := st.ReplaceSnapshot(ctx, "default", "ns-folded", large, seq); err != nil {
		t.Fatal(err)
	}
	appendAll(t, st, "ns-folded", deletion(200, 3))
	if err := st.PutConfig(ctx, "peer/targets/ns-replica", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	create("ns-replica", large, deletion(200, 3))
	create("ns-old", nil, large, deletion(800, 3))
	if _, err := st.Reset(ctx, "default", "ns-old"); err != nil {
		t.Fatal(err)
	}
	if bad {
		create("ns-bad", small, []byte{0xff, 0xff})
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir
}

func appendAll(t *testing.T, st persistence.Documents, ns string, updates ...[]byte) uint64 {
	t.Helper()
	var seq uint64
	var err error
	for _, u := range updates {
		if seq, err = st.Append("default", ns, u); err != nil {
			t.Fatal(err)
		}
	}
	if seq > 0 {
		if err := st.WaitFlushed(context.Background(), "default", ns, seq); err != nil {
			t.Fatal(err)
		}
	}
	return seq
}

func checkLines(t *testing.T, out string) map[string]checkLine {
	t.Helper()
	lines := map[string]checkLine{}
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		var l checkLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		key := l.NamespaceID
		if l.Archive > 0 {
			key += "/archive"
		}
		lines[key] = l
	}
	return lines
}

// TestStoreCheck: every verdict, with the sizes this version and older versions rebuild.
func TestStoreCheck(t *testing.T) {
	dir := makeCheckStore(t, false)
	code, out, errOut := runCmd(t, "store", "check", dir, "--json", "--archives")
	if code != 3 {
		t.Fatalf("exit %d (want 3: some need attention), stderr %q\n%s", code, errOut, out)
	}
	lines := checkLines(t, out)
	type want struct {
		verdict      string
		text, olderT int // characters of "text", now and as older versions had it (0: the same)
		through      uint64
		replica      bool
	}
	for key, w := range map[string]want{
		"ns-small":       {verdictOK, 37, 0, 0, false},
		"ns-served":      {verdictServed, 1197, 909, 0, false},
		"ns-clean":       {verdictOK, 1197, 0, 0, false},
		"ns-folded":      {verdictUnverified, 1197, 0, 1, false},
		"ns-replica":     {verdictReplica, 1197, 0, 0, true},
		"ns-old/archive": {verdictServed, 1197, 909, 0, false},
	} {
		l, ok := lines[key]
		if !ok {
			t.Fatalf("no line for %s:\n%s", key, out)
		}
		if l.Verdict != w.verdict || l.Roots["text"] != w.text || l.OlderRoots["text"] != w.olderT || l.SnapshotThrough != w.through ||
			l.Replica != w.replica || l.Reason == "" {
			t.Errorf("%s: %+v; want %+v", key, l, w)
		}
		if key != "ns-small" && l.MaxStructs < 600 {
			t.Errorf("%s: the largest client owns %d structs, want at least 600", key, l.MaxStructs)
		}
	}
	if len(lines) != 6 {
		t.Errorf("%d lines, want 6:\n%s", len(lines), out)
	}

	// the report for people
	code, out, _ = runCmd(t, "store", "check", dir, "ns-served")
	for _, s := range []string{"ns-served, owner default: SERVED-DAMAGED", "text: 1197 (an older version: 909)", "the largest client owns 601 structs", "what it served to editors and peers lacked it"} {
		if code != 3 || !strings.Contains(out, s) {
			t.Fatalf("check ns-served: exit %d, no %q in\n%s", code, s, out)
		}
	}
	code, out, _ = runCmd(t, "store", "check", dir, "ns-small")
	if code != 0 || !strings.Contains(out, "ns-small, owner default: OK") || strings.Contains(out, "older version:") {
		t.Fatalf("check ns-small: exit %d\n%s", code, out)
	}
	// a namespace's archives come with it
	code, out, _ = runCmd(t, "store", "check", dir, "ns-old", "--json")
	if l := checkLines(t, out)["ns-old/archive"]; code != 3 || l.Verdict != verdictServed {
		t.Fatalf("check ns-old: exit %d\n%s", code, out)
	}
}

func TestStoreCheckErrors(t *testing.T) {
	dir := makeCheckStore(t, true)
	code, out, _ := runCmd(t, "store", "check", dir, "--json")
	if l := checkLines(t, out)["ns-bad"]; code != 1 || l.Verdict != verdictBroken || !strings.Contains(l.Reason, "logged update 1 does not apply") {
		t.Fatalf("exit %d, ns-bad %+v\n%s", code, l, out)
	}
	if code, _, errOut := runCmd(t, "store", "check", dir, "ns-none"); code != 1 || !strings.Contains(errOut, "no document ns-none") ||
		!strings.Contains(errOut, "nmcr store ls "+dir+" lists") {
		t.Fatalf("unknown namespace: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"store", "check"}, {"store", "check", dir, "ns-a", "ns-b"}, {"store", "check", dir, "--bogus"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}
