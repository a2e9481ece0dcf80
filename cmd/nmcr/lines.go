package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
)

// eachLine calls fn for every non-blank line of r (trimmed of surrounding white space), in
// order, with its 1-based line number. Lines may be arbitrarily long (megabytes of hex). It
// stops at the first error fn returns, or a read error.
func eachLine(r io.Reader, fn func(lineNo int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for lineNo := 1; ; lineNo++ {
		buf = buf[:0]
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			buf = append(buf, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if line := bytes.TrimSpace(buf); len(line) > 0 {
			if ferr := fn(lineNo, line); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// decodeHexLine decodes one line of hex (upper or lower case) into a fresh slice.
func decodeHexLine(line []byte) ([]byte, error) {
	out := make([]byte, hex.DecodedLen(len(line)))
	n, err := hex.Decode(out, line)
	return out[:n], err
}

// The forms of `nmcr doc --in`.
const (
	inHex    = "hex"
	inBase64 = "base64"
	inBinary = "binary"
)

// readUpdates reads the Yjs updates of stdin in form in (inHex, inBase64, inBinary, or ""
// to detect it):
//
//   - binary: the whole input is one update (GET …/update);
//   - hex: one update per line (nmcr store export);
//   - base64: one update per line, or a Server-Sent Events stream whose data: lines carry
//     them (GET …/events; comments, event:, id: and retry: lines and empty data are skipped).
//
// Detection: input with a byte that is neither printable ASCII nor white space is binary; a
// text whose first line starts with "data:", "event:" or ":" is an event stream; a text whose
// every line is hex is hex; otherwise base64.
func readUpdates(r io.Reader, in string) ([][]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	if in == "" {
		in = detectForm(data)
	}
	if in == inBinary {
		if len(data) == 0 {
			return nil, nil
		}
		return [][]byte{data}, nil
	}
	var out [][]byte
	err = eachLine(bytes.NewReader(data), func(lineNo int, line []byte) error {
		if in == inBase64 {
			payload, skip := sseData(line)
			if skip {
				return nil
			}
			u, err := decodeBase64(payload)
			if err != nil {
				return fmt.Errorf("line %d: not base64: %v", lineNo, err)
			}
			out = append(out, u)
			return nil
		}
		u, err := decodeHexLine(line)
		if err != nil {
			return fmt.Errorf("line %d: not hex: %v (give --in to name the input's form)", lineNo, err)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// detectForm guesses the form of an input (see readUpdates).
func detectForm(data []byte) string {
	for _, c := range data {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return inBinary
		}
	}
	first := bytes.TrimSpace(data)
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if bytes.HasPrefix(first, []byte("data:")) || bytes.HasPrefix(first, []byte("event:")) || bytes.HasPrefix(first, []byte(":")) {
		return inBase64
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		for _, c := range bytes.TrimSpace(line) {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return inBase64
			}
		}
	}
	return inHex
}

// sseData returns what a line carries in base64 form: the payload of an event stream's
// data: line, nothing (skip) for its other lines and for empty data, or the line itself.
func sseData(line []byte) (payload []byte, skip bool) {
	switch {
	case line[0] == ':', bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		return nil, true
	case bytes.HasPrefix(line, []byte("data:")):
		payload = bytes.TrimSpace(line[len("data:"):])
		return payload, len(payload) == 0
	}
	return line, false
}

// decodeBase64 reads standard or URL-safe base64, padded or not.
func decodeBase64(s []byte) ([]byte, error) {
	enc := base64.StdEncoding
	if bytes.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !bytes.HasSuffix(s, []byte("=")) && len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	out := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(out, s)
	return out[:n], err
}
