package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/framecap"
	"github.com/nomicore/nomicore/replication/protocol"
)

// frameCommands is `nmcr frame decode|encode` (docs/protocol.md#json-form). Decoding is
// stateless: sequences are printed, not checked (that needs a connection). Limits default to
// the binaries'.
var frameCommands = cli.Group{
	Path: "nmcr frame",
	About: "Replication messages (frames) as JSON: {\"type\":\"HELLO\",\"sequence\":1,\"payload\":{…}}, with the " +
		"contract's message and field names, bytes as lowercase hex.",
	Commands: []cli.Command{
		{Name: "decode", Summary: "frames in (hex lines, or a --capture-frames file), one JSON line out per frame",
			Run: func(args []string, io cli.IO) int { return runFrame("decode", args, io) }},
		{Name: "encode", Summary: "frame JSON lines in, one hex frame out per line",
			Run: func(args []string, io cli.IO) int { return runFrame("encode", args, io) }},
	},
}

const frameDecodeAbout = `Reads one frame per line: a line of hex, or a line of a capture file written by ` +
	`"hub serve --capture-frames FILE" or "peer run --capture-frames FILE" (TIME in|out CONNECTION-ID HEX; ` +
	`comment lines starting with # are skipped). Writes one JSON line per frame; a capture line's time, ` +
	`direction and connection id come first ({"time":…,"direction":"in","connectionId":…,"type":…}). ` +
	`A frame that does not decode prints {"error":"<CODE>"} and the command goes on. Exit status: 0 when ` +
	`every line was handled, 1 when a line was not hex or not a capture line, 2 for bad usage.`

const frameEncodeAbout = `Reads one frame JSON line per line, writes one frame per line in hex. A frame the ` +
	`encoder refuses prints {"error":"<CODE>"} and the command goes on. Exit status: 0 when every line was ` +
	`handled, 1 when a line was not JSON, 2 for bad usage.`

func runFrame(sub string, args []string, cio cli.IO) int {
	encode := sub == "encode"
	synopsis, about := "nmcr frame decode [--chunked] [--presence] [--max-frame-bytes N] … < FRAMES", frameDecodeAbout
	if encode {
		synopsis, about = "nmcr frame encode [--max-frame-bytes N] … < JSON-LINES", frameEncodeAbout
	}
	cfg := protocol.DefaultConfig()
	lim := cfg.Limits()
	f := cli.NewFlags("nmcr frame "+sub, synopsis, about)
	var chunked, presence *bool
	if !encode {
		chunked = f.Bool("chunked", false, "decode as on a connection that negotiated chunked transfers (UPDATE_CHUNK allowed)")
		presence = f.Bool("presence", false, "decode as on a connection that negotiated this implementation's presence extension (PRESENCE allowed)")
	}
	f.IntVar(&lim.MaxFrameBytes, "max-frame-bytes", lim.MaxFrameBytes, "largest frame, in bytes (the binaries' --max-frame-bytes)")
	f.IntVar(&lim.MaxUpdateBytes, "max-update-bytes", lim.MaxUpdateBytes, "largest update in a frame, in bytes")
	f.IntVar(&lim.MaxSyncDiffBytes, "max-sync-diff-bytes", lim.MaxSyncDiffBytes, "largest catch-up difference in a frame, in bytes")
	f.IntVar(&lim.MaxBootstrapBytes, "max-bootstrap-bytes", lim.MaxBootstrapBytes, "largest snapshot in a frame, in bytes")
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	if len(operands) > 0 {
		return f.Mistake(cio, "unexpected argument %q (the frames come on stdin)", operands[0])
	}
	if lim.MaxFrameBytes < protocol.HeaderLen || lim.MaxUpdateBytes < 0 || lim.MaxSyncDiffBytes < 0 || lim.MaxBootstrapBytes < 0 {
		return f.Mistake(cio, "limits must be non-negative and --max-frame-bytes at least %d", protocol.HeaderLen)
	}
	var caps protocol.Capability
	if encode || *chunked { // the encoder writes whatever message it is given, 0x42 and 0x43 included
		caps = protocol.CapChunkedUpdate
	}
	if encode || *presence {
		caps |= protocol.CapPresence
	}
	codec := protocol.NewCodec(lim, caps)

	out := bufio.NewWriterSize(cio.Stdout, 64<<10)
	status := 0
	err := eachLine(cio.Stdin, func(lineNo int, line []byte) error {
		var res []byte
		var ferr error
		if encode {
			res, ferr = frameEncodeLine(codec, line)
		} else {
			res, ferr = frameDecodeLine(codec, line)
			if errors.Is(ferr, framecap.ErrComment) {
				return nil
			}
		}
		if ferr != nil {
			code := protocol.CodeMalformedFrame
			var e *protocol.Error
			if errors.As(ferr, &e) {
				code = e.Code
			} else {
				status = 1 // not a frame at all
			}
			var pe prefixedError
			if errors.As(ferr, &pe) && pe.prefix != nil {
				res = append(pe.prefix, `"error":"`...)
			} else {
				res = []byte(`{"error":"`)
			}
			res = append(append(res, code...), `"}`...)
			fmt.Fprintf(cio.Stderr, "line %d: %v\n", lineNo, ferr)
		}
		_, werr := out.Write(append(res, '\n'))
		return werr
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(cio.Stderr, "nmcr frame %s: %v\n", sub, err)
		return 1
	}
	return status
}

// prefixedError is a line that failed after its capture fields were read: prefix is the
// JSON they start the output line with ({"time":…,"direction":…,"connectionId":…,).
type prefixedError struct {
	error
	prefix []byte
}

func (e prefixedError) Unwrap() error { return e.error }

// frameDecodeLine decodes one line: bare hex, or a capture file line whose time, direction
// and connection id lead the frame's JSON.
func frameDecodeLine(codec protocol.Codec, line []byte) ([]byte, error) {
	cl, err := framecap.ParseLine(line)
	if err != nil {
		if errors.Is(err, framecap.ErrComment) {
			return nil, err
		}
		return nil, err
	}
	var prefix []byte
	if cl.Direction != "" {
		prefix = append(prefix, `{"time":`...)
		prefix = strconv.AppendQuote(prefix, cl.Time)
		prefix = append(prefix, `,"direction":`...)
		prefix = strconv.AppendQuote(prefix, cl.Direction)
		prefix = append(prefix, `,"connectionId":`...)
		prefix = strconv.AppendQuote(prefix, cl.ConnectionID)
		prefix = append(prefix, ',')
	}
	msg, err := decodeHexLine(cl.Hex)
	if err != nil {
		return nil, prefixedError{fmt.Errorf("not hex: %w", err), prefix}
	}
	fr, err := codec.Decode(msg)
	if err != nil {
		return nil, prefixedError{err, prefix}
	}
	js := protocol.AppendFrameJSON(nil, fr)
	if prefix == nil {
		return js, nil
	}
	return append(prefix, js[1:]...), nil // {"time":…, + "type":…}
}

func frameEncodeLine(codec protocol.Codec, line []byte) ([]byte, error) {
	if !json.Valid(line) {
		return nil, errors.New("not JSON")
	}
	f, err := protocol.ParseFrameJSON(line)
	if err != nil {
		return nil, err
	}
	msg, err := codec.AppendFrame(nil, f.Sequence, f.Message)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%x", msg), nil
}
