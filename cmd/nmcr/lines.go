package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
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
