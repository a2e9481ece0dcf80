package persistence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The store format. A store file names its format in its marker record, meta/format:
// "nomicore-persistence/N". N changes only when a version of Nomicore writes something an
// older version would misread; additions that older versions skip (a configuration key
// they do not know) keep it. This version reads and writes FormatVersion, and refuses a
// store of a newer format with a *FormatError instead of reading it: an older binary
// started on the data directory of a newer one (a rollback after an upgrade) stops with a
// message saying so, and does not touch the file.
const (
	formatPrefix = "nomicore-persistence/"
	// FormatVersion is the store format this version reads and writes. 2: each document's
	// snapshot sits in a bucket of its own.
	FormatVersion = 2
)

// formatName is the marker this version writes.
var formatName = formatPrefix + strconv.Itoa(FormatVersion)

// ErrNewerFormat: the store file was written in a format newer than this version reads.
// See FormatError.
var ErrNewerFormat = errors.New("persistence: store written by a newer version")

// FormatError reports a store file of a format this version does not read. It unwraps to
// ErrNewerFormat when the format is newer (the file is not damaged: it needs a newer
// binary), and to ErrCorrupt otherwise.
type FormatError struct {
	Path  string
	Found int // the format the file names
}

func (e *FormatError) Error() string {
	if e.Found > FormatVersion {
		return fmt.Sprintf("persistence: store file %s is in store format %d, written by a newer version of Nomicore; "+
			"this version reads store format %d at most: run the newer version (or a later one) on it, or restore a "+
			"backup taken by this version into another data directory", e.Path, e.Found, FormatVersion)
	}
	return fmt.Sprintf("persistence: store file %s is in store format %d, which this version no longer reads (it reads format %d)",
		e.Path, e.Found, FormatVersion)
}

func (e *FormatError) Unwrap() error {
	if e.Found > FormatVersion {
		return ErrNewerFormat
	}
	return ErrCorrupt
}

// parseFormat checks the payload of a store's format marker: nil for this version's format,
// a *FormatError for another version, or an error for a marker that is not one of ours.
func parseFormat(path string, marker []byte) error {
	s := string(marker)
	if s == formatName {
		return nil
	}
	v, ok := strings.CutPrefix(s, formatPrefix)
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n <= 0 || strconv.Itoa(n) != v {
		return fmt.Errorf("format %q, want %q", marker, formatName)
	}
	return &FormatError{Path: path, Found: n}
}
