package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func sample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Kind: KindHub, CreatedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Version: "test", InstanceID: "hub", StoreFormat: 2})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := w.Section(KindStore, 10)
	if err != nil {
		t.Fatal(err)
	}
	sw.Write([]byte("01234"))
	sw.Write([]byte("56789"))
	if err := w.Bytes(KindTokens, []byte(`{"peers":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.JSON(KindConfig, map[string]string{"key": "k"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Bytes(KindRecord, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := sample(t)
	if !bytes.HasPrefix(b, []byte(Magic)) || binary.BigEndian.Uint16(b[len(Magic):]) != Version {
		t.Fatalf("the file starts % x", b[:18])
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Kind != KindHub || h.InstanceID != "hub" || h.StoreFormat != 2 || !h.CreatedAt.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("header %+v", h)
	}
	type sec struct {
		kind Kind
		data string
	}
	var got []sec
	for {
		kind, size, body, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(body)
		if err != nil || int64(len(data)) != size {
			t.Fatalf("%v: %d of %d bytes, %v", kind, len(data), size, err)
		}
		got = append(got, sec{kind, string(data)})
	}
	want := []sec{{KindStore, "0123456789"}, {KindTokens, `{"peers":[]}`}, {KindConfig, `{"key":"k"}`}, {KindRecord, ""}}
	if len(got) != len(want) {
		t.Fatalf("sections %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("section %d: %v, want %v", i, got[i], want[i])
		}
	}
	if _, _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v", err)
	}
}

// Every single flipped byte, every cut, and anything appended is noticed: the file is
// refused as damaged (or, for the magic, as not a backup; for the version, as newer).
func TestDamageNoticed(t *testing.T) {
	b := sample(t)
	if _, err := Verify(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x10
		_, err := Verify(bytes.NewReader(bad))
		switch {
		case err == nil:
			t.Fatalf("byte %d flipped: accepted", i)
		case i < len(Magic) && !errors.Is(err, ErrNotBackup):
			t.Fatalf("magic byte %d flipped: %v", i, err)
		case i >= len(Magic)+2 && !errors.Is(err, ErrDamaged):
			t.Fatalf("byte %d flipped: %v, want damaged", i, err)
		}
	}
	for n := range len(b) {
		_, err := Verify(bytes.NewReader(b[:n]))
		if err == nil || n >= len(Magic) && !errors.Is(err, ErrDamaged) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
		if n > 0 && n >= len(Magic) && !strings.Contains(err.Error(), "ends") {
			t.Fatalf("cut to %d bytes: %v does not say it ends early", n, err)
		}
	}
	if _, err := Verify(bytes.NewReader(append(bytes.Clone(b), 0))); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a byte after the end: %v", err)
	}
}

func TestForeignAndNewer(t *testing.T) {
	for _, foreign := range []string{"", "SQLite format 3\x00 and more bytes", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"} {
		if _, err := Verify(strings.NewReader(foreign)); !errors.Is(err, ErrNotBackup) {
			t.Fatalf("%q: %v, want ErrNotBackup", foreign, err)
		}
	}
	b := sample(t)
	binary.BigEndian.PutUint16(b[len(Magic):], Version+1)
	_, err := Verify(bytes.NewReader(b))
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Found != Version+1 || !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), "newer version") {
		t.Fatalf("a newer format: %v", err)
	}
}

// A section claiming more than a structured section may hold is refused before anything is
// allocated for it.
func TestHugeSectionRefused(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(Magic)
	buf.Write([]byte{0, Version})
	buf.WriteByte(byte(KindHeader))
	buf.Write(binary.BigEndian.AppendUint64(nil, 1<<40))
	if _, err := NewReader(&buf); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a header section of 1 TiB: %v", err)
	}
}

func TestWriterChecksSizes(t *testing.T) {
	w, err := NewWriter(io.Discard, Header{Kind: KindHub})
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := w.Section(KindStore, 4)
	if _, err := sw.Write([]byte("12345")); err == nil {
		t.Fatal("a write past the section's length was taken")
	}
	w, _ = NewWriter(io.Discard, Header{Kind: KindHub})
	w.Section(KindStore, 4)
	if err := w.Close(); err == nil {
		t.Fatal("a short section was closed")
	}
}

// FuzzReader: any input is read without a panic and without allocating from a length it did
// not check; only a file this package wrote (or one whose checksum matches) is accepted.
func FuzzReader(f *testing.F) {
	f.Add(sample(f))
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic), 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 2, '{', '}'))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		for {
			_, size, body, err := r.Next()
			if err != nil {
				return
			}
			if size < 1<<20 {
				io.Copy(io.Discard, body)
			}
		}
	})
}
