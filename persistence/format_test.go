package persistence_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// A store written in a newer format than this version reads is refused at open — read-write
// and read-only — with a FormatError naming the file and both formats, which is not a
// damaged store; the file is left as it was. The format this version writes opens.
func TestBoltNewerFormatRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	populate(t, path)
	if err := persistencetest.SetFormat(path, persistence.FormatVersion); err != nil {
		t.Fatal(err)
	}
	st, err := persistence.OpenBolt(path, persistence.Options{})
	if err != nil {
		t.Fatalf("this version's own format: %v", err)
	}
	closeStore(t, st)

	if err := persistencetest.SetFormat(path, persistence.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := persistence.OpenBolt(path, persistence.Options{ReadOnly: ro})
		var fe *persistence.FormatError
		if !errors.As(err, &fe) || fe.Found != persistence.FormatVersion+1 || fe.Path != path {
			t.Fatalf("read-only %v: %v, want a FormatError for format %d", ro, err, persistence.FormatVersion+1)
		}
		if !errors.Is(err, persistence.ErrNewerFormat) || errors.Is(err, persistence.ErrCorrupt) {
			t.Fatalf("read-only %v: %v is not ErrNewerFormat alone", ro, err)
		}
		for _, want := range []string{path, "store format 3", "newer version", "reads store format 2"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("read-only %v: %q does not say %q", ro, err, want)
			}
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("opening a store of a newer format changed the file")
	}

	// A marker that names no format of ours is damage, not a newer format.
	if err := persistencetest.SetFormat(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path, persistence.Options{})
	if ce := wantCorrupt(t, err, path); ce.Where != "meta/format" || errors.Is(err, persistence.ErrNewerFormat) {
		t.Fatalf("format 0: %v", err)
	}
}
