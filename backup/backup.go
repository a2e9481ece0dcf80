// Package backup is the file format of a Nomicore backup: what `hub backup` (and GET
// /v1/backup) writes and `hub restore` reads. A backup is one stream, written as it is
// taken — the copy of a running store is not known in full before its last byte — and
// checked as a whole before anything is restored from it.
//
// Layout (integers big endian):
//
//	magic     16 bytes  "NOMICORE-BACKUP\n"
//	version    2 bytes  the format of the file (Version); a reader refuses a newer one
//	sections            kind (1 byte) | length (8 bytes) | length bytes of payload
//	end                 kind 0xFF | length 32 | SHA-256 of every byte before this section
//
// The first section is the header (KindHeader, JSON: what was backed up, when, by which
// version); the others depend on the header's kind: a single hub's store file and its
// tokens file, or a hub cluster's state (see the Kind constants). Nothing may follow the
// end section. A file cut short, a flipped bit anywhere, or a section that does not fit
// its length is a *DamagedError; a file that does not start with the magic is
// ErrNotBackup; one of a newer format a *VersionError.
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// Magic starts every backup file.
const Magic = "NOMICORE-BACKUP\n"

// Version is the backup format this package writes and the newest it reads.
const Version = 1

// Kind says what a section holds.
type Kind uint8

// Section kinds.
const (
	KindHeader Kind = 1 // JSON Header; the first section
	// A single hub.
	KindStore  Kind = 2 // the store file (DATA/nomicore.db), as one read transaction saw it
	KindTokens Kind = 3 // the tokens file (peers' and editors' token hashes and grants)
	// A hub cluster.
	KindCluster   Kind = 16 // JSON: the cluster's log position and layout when the backup began
	KindNamespace Kind = 17 // JSON: one namespace's entry and where its log starts; its snapshot and records follow
	KindSnapshot  Kind = 18 // the namespace's snapshot (a Yjs update)
	KindRecord    Kind = 19 // one record of the namespace's log: position (8 bytes), then the record
	KindConfig    Kind = 20 // JSON: one key of the cluster's configuration map and its value
	KindVersion   Kind = 21 // one saved version of the namespace: its id (8 bytes), then its state (a Yjs update)
	kindEnd       Kind = 0xFF
)

func (k Kind) String() string {
	switch k {
	case KindHeader:
		return "header"
	case KindStore:
		return "store"
	case KindTokens:
		return "tokens"
	case KindCluster:
		return "cluster"
	case KindNamespace:
		return "namespace"
	case KindSnapshot:
		return "snapshot"
	case KindRecord:
		return "record"
	case KindConfig:
		return "config"
	case KindVersion:
		return "version"
	case kindEnd:
		return "end"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Limits on what a reader takes from a section's declared length before it reads a byte:
// structured sections are read into memory, the others are streamed.
const (
	maxJSONSection = 64 << 20
	maxSection     = 1 << 50
)

// Header describes a backup.
type Header struct {
	// Kind is "hub" (a single hub: KindStore, KindTokens) or "cluster" (a hub cluster:
	// KindCluster, then per namespace KindNamespace, KindSnapshot, KindRecord…,
	// KindVersion…, and KindConfig).
	Kind       string    `json:"kind"`
	CreatedAt  time.Time `json:"createdAt"`
	Version    string    `json:"version"`        // of the hub that took it
	InstanceID string    `json:"instanceId"`     // the hub's --instance-id
	Node       string    `json:"node,omitempty"` // cluster: the node that took it
	// StoreFormat is the store format of a single hub's store file.
	StoreFormat int `json:"storeFormat,omitempty"`
}

// Header kinds.
const (
	KindHub        = "hub"
	KindHubCluster = "cluster"
)

// Errors. Match them with errors.Is.
var (
	// ErrNotBackup: the file does not start like a Nomicore backup.
	ErrNotBackup = errors.New("not a Nomicore backup")
	// ErrDamaged: the file is cut short, does not match its checksum, or does not parse.
	ErrDamaged = errors.New("the backup is damaged")
	// ErrNewer: the file is of a newer format than this version reads.
	ErrNewer = errors.New("the backup was written by a newer version")
)

// DamagedError says how a backup is damaged. It unwraps to ErrDamaged.
type DamagedError struct {
	Offset int64 // where the problem was found; -1 for the file as a whole (its checksum)
	Reason string
}

func (e *DamagedError) Error() string {
	if e.Offset < 0 {
		return "the backup is damaged: " + e.Reason
	}
	return fmt.Sprintf("the backup is damaged (at byte %d): %s", e.Offset, e.Reason)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }

// VersionError is a backup of a format this version does not read.
type VersionError struct{ Found int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("the backup is of backup format %d, written by a newer version of Nomicore; this version reads format %d at most: restore it with that version or a later one", e.Found, Version)
}

func (e *VersionError) Unwrap() error { return ErrNewer }

// Writer writes a backup. Every method returns the first error met, and every later call
// returns it too.
type Writer struct {
	w    io.Writer
	sum  hash.Hash
	left int64 // bytes the open section still needs
	kind Kind  // of the open section
	err  error
}

// NewWriter starts a backup on w with its header.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	bw := &Writer{w: w, sum: sha256.New()}
	head := make([]byte, 0, len(Magic)+2)
	head = append(head, Magic...)
	head = binary.BigEndian.AppendUint16(head, Version)
	bw.write(head)
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if err := bw.Bytes(KindHeader, b); err != nil {
		return nil, err
	}
	return bw, nil
}

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(p); err != nil {
		w.err = err
		return
	}
	w.sum.Write(p)
}

// Section opens a section of size bytes and returns where to write its payload: exactly
// size bytes, before the next section.
func (w *Writer) Section(kind Kind, size int64) (io.Writer, error) {
	if w.err == nil && w.left != 0 {
		w.err = fmt.Errorf("backup: the %v section is %d bytes short", w.kind, w.left)
	}
	if w.err == nil && (size < 0 || size > maxSection || kind == kindEnd) {
		w.err = fmt.Errorf("backup: a %v section of %d bytes", kind, size)
	}
	hdr := binary.BigEndian.AppendUint64([]byte{byte(kind)}, uint64(size))
	w.write(hdr)
	w.kind, w.left = kind, size
	return sectionWriter{w}, w.err
}

type sectionWriter struct{ w *Writer }

func (s sectionWriter) Write(p []byte) (int, error) {
	w := s.w
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(p)) > w.left {
		w.err = fmt.Errorf("backup: %d bytes more than the %v section's length", int64(len(p))-w.left, w.kind)
		return 0, w.err
	}
	w.write(p)
	if w.err != nil {
		return 0, w.err
	}
	w.left -= int64(len(p))
	return len(p), nil
}

// Bytes writes a whole section.
func (w *Writer) Bytes(kind Kind, payload []byte) error {
	sw, err := w.Section(kind, int64(len(payload)))
	if err != nil {
		return err
	}
	_, err = sw.Write(payload)
	return err
}

// JSON writes a section holding v as JSON.
func (w *Writer) JSON(kind Kind, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.Bytes(kind, b)
}

// Close writes the end section with the checksum. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err == nil && w.left != 0 {
		w.err = fmt.Errorf("backup: the %v section is %d bytes short", w.kind, w.left)
	}
	if w.err != nil {
		return w.err
	}
	digest := w.sum.Sum(nil)
	end := binary.BigEndian.AppendUint64([]byte{byte(kindEnd)}, uint64(len(digest)))
	if _, err := w.w.Write(append(end, digest...)); err != nil {
		w.err = err
	}
	return w.err
}

// Reader reads a backup, section by section, checking it as it goes; its last section's
// checksum says whether everything read was what was written. Nothing read from a
// backup may be trusted before Next has returned io.EOF: read it whole once (Verify) before
// restoring from it.
type Reader struct {
	r      io.Reader
	sum    hash.Hash
	off    int64
	header Header
	cur    *io.LimitedReader // the open section's payload, nil between sections
	done   bool
}

// NewReader checks the start of a backup and reads its header.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{r: r, sum: sha256.New()}
	head := make([]byte, len(Magic)+2)
	if n, err := io.ReadFull(r, head); err != nil {
		if n >= len(Magic) && string(head[:len(Magic)]) == Magic || n > 0 && bytes.HasPrefix([]byte(Magic), head[:n]) {
			return nil, &DamagedError{Offset: int64(n), Reason: "the file ends before its header (an interrupted backup or copy?)"}
		}
		return nil, fmt.Errorf("%w (it is %d bytes long)", ErrNotBackup, n)
	}
	if string(head[:len(Magic)]) != Magic {
		return nil, fmt.Errorf("%w (it does not start with %q)", ErrNotBackup, "NOMICORE-BACKUP")
	}
	br.sum.Write(head)
	br.off = int64(len(head))
	if v := int(binary.BigEndian.Uint16(head[len(Magic):])); v != Version {
		if v > Version {
			return nil, &VersionError{Found: v}
		}
		return nil, &DamagedError{Offset: int64(len(Magic)), Reason: fmt.Sprintf("backup format %d does not exist", v)}
	}
	kind, size, err := br.next()
	if err != nil {
		return nil, err
	}
	if kind != KindHeader {
		return nil, br.damaged("the first section is %v, not the header", kind)
	}
	b, err := br.ReadAll(size)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &br.header); err != nil {
		return nil, br.damaged("the header does not parse: %v", err)
	}
	return br, nil
}

// Header returns the backup's header.
func (r *Reader) Header() Header { return r.header }

func (r *Reader) damaged(format string, args ...any) error {
	return &DamagedError{Offset: r.off, Reason: fmt.Sprintf(format, args...)}
}

// read fills p from the file, counting and hashing it.
func (r *Reader) read(p []byte) error {
	n, err := io.ReadFull(r.r, p)
	r.sum.Write(p[:n])
	r.off += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return r.damaged("the file ends early (an interrupted backup or copy?)")
	}
	return err
}

// next reads a section's kind and length (the open section must have been read whole).
func (r *Reader) next() (Kind, int64, error) {
	var hdr [9]byte
	if err := r.read(hdr[:]); err != nil {
		return 0, 0, err
	}
	kind, size := Kind(hdr[0]), binary.BigEndian.Uint64(hdr[1:])
	if size > maxSection {
		return 0, 0, r.damaged("a %v section claims %d bytes", kind, size)
	}
	return kind, int64(size), nil
}

// Next moves to the next section and returns its kind, its length and its payload, to be
// read before the next call (what is left unread is skipped). After the last section it
// checks the end section — the checksum, and that nothing follows — and returns io.EOF, or
// a *DamagedError.
func (r *Reader) Next() (Kind, int64, io.Reader, error) {
	if r.done {
		return 0, 0, nil, io.EOF
	}
	if r.cur != nil {
		if _, err := io.Copy(io.Discard, r.cur); err != nil {
			return 0, 0, nil, err
		}
		if r.cur.N > 0 {
			return 0, 0, nil, r.damaged("the file ends early (an interrupted backup or copy?)")
		}
		r.cur = nil
	}
	digest := r.sum.Sum(nil) // of everything before this section
	kind, size, err := r.next()
	if err != nil {
		return 0, 0, nil, err
	}
	if kind == kindEnd {
		if size != sha256.Size {
			return 0, 0, nil, r.damaged("the end section holds %d bytes, not a SHA-256", size)
		}
		stored := make([]byte, sha256.Size)
		if err := r.read(stored); err != nil {
			return 0, 0, nil, err
		}
		if !bytes.Equal(stored, digest) {
			return 0, 0, nil, &DamagedError{Offset: -1, Reason: fmt.Sprintf("its checksum does not match its content "+
				"(stored %x…, computed %x…): a byte changed since it was written", stored[:6], digest[:6])}
		}
		var one [1]byte
		if n, _ := r.r.Read(one[:]); n > 0 {
			return 0, 0, nil, r.damaged("bytes follow the end section")
		}
		r.done = true
		return 0, 0, nil, io.EOF
	}
	r.cur = &io.LimitedReader{R: sectionReader{r}, N: size}
	return kind, size, r.cur, nil
}

// sectionReader reads the open section's bytes from the file, counting and hashing them.
type sectionReader struct{ r *Reader }

func (s sectionReader) Read(p []byte) (int, error) {
	n, err := s.r.r.Read(p)
	s.r.sum.Write(p[:n])
	s.r.off += int64(n)
	if errors.Is(err, io.EOF) {
		if n > 0 {
			return n, nil
		}
		return 0, s.r.damaged("the file ends early (an interrupted backup or copy?)")
	}
	return n, err
}

// ReadAll reads the open section whole — size bytes, as Next returned it — into memory,
// refusing one larger than a structured section may be.
func (r *Reader) ReadAll(size int64) ([]byte, error) {
	if size > maxJSONSection {
		return nil, r.damaged("a section of %d bytes where at most %d are expected", size, maxJSONSection)
	}
	if r.cur == nil {
		r.cur = &io.LimitedReader{R: sectionReader{r}, N: size}
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r.cur, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Verify reads a whole backup and checks it: its structure and its checksum. It returns
// the header, or the first problem found.
func Verify(r io.Reader) (Header, error) {
	br, err := NewReader(r)
	if err != nil {
		return Header{}, err
	}
	for {
		_, _, _, err := br.Next()
		if errors.Is(err, io.EOF) {
			return br.Header(), nil
		}
		if err != nil {
			return Header{}, err
		}
	}
}
