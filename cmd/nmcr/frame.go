package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nomicore/nomicore/internal/envflag"
	"github.com/nomicore/nomicore/replication/protocol"
)

func init() { register("frame", runFrame) }

const frameUsage = `usage:
  nmcr frame decode [--chunked] [--max-frame-bytes N] [--max-update-bytes N]
                    [--max-sync-diff-bytes N] [--max-bootstrap-bytes N]
      hex frames in (one per line), one frame JSON line out per frame (GUIDE §7)
  nmcr frame encode [--max-frame-bytes N] [--max-update-bytes N] ...
      frame JSON lines in, one hex frame out per line
A frame that fails prints {"error":"<CODE>"} (the §13 code) and the command goes on; the
exit status is 0 when every line was handled, 1 when a line was not hex (decode) or not JSON
(encode), 2 for bad usage. Every flag also reads NOMICORE_<FLAG> (NOMICORE_MAX_FRAME_BYTES).
`

// runFrame is `nmcr frame decode|encode` (GUIDE §7). Decoding is stateless: sequences are
// printed, not checked (check 9 needs a connection). Limits default to GUIDE §6.
func runFrame(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand("frame", frameUsage, args, stdout, stderr, "decode", "encode")
	if !ok {
		return code
	}
	encode := sub == "encode"

	cfg := protocol.DefaultConfig()
	lim := cfg.Limits()
	fs := flag.NewFlagSet("nmcr frame "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	chunked := fs.Bool("chunked", false, "decode with CAP_CHUNKED_UPDATE negotiated (UPDATE_CHUNK allowed)")
	fs.IntVar(&lim.MaxFrameBytes, "max-frame-bytes", lim.MaxFrameBytes, "maxFrameBytes")
	fs.IntVar(&lim.MaxUpdateBytes, "max-update-bytes", lim.MaxUpdateBytes, "maxUpdateBytes")
	fs.IntVar(&lim.MaxSyncDiffBytes, "max-sync-diff-bytes", lim.MaxSyncDiffBytes, "maxSyncDiffBytes")
	fs.IntVar(&lim.MaxBootstrapBytes, "max-bootstrap-bytes", lim.MaxBootstrapBytes, "maxBootstrapBytes")
	if err := envflag.Apply(fs, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "nmcr frame: %v\n", err)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nmcr frame: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if lim.MaxFrameBytes < protocol.HeaderLen || lim.MaxUpdateBytes < 0 || lim.MaxSyncDiffBytes < 0 || lim.MaxBootstrapBytes < 0 {
		fmt.Fprintln(stderr, "nmcr frame: limits must be non-negative and --max-frame-bytes at least 20")
		return 2
	}
	var caps protocol.Capability
	if *chunked || encode { // the encoder writes whatever message it is given, 0x42 included
		caps = protocol.CapChunkedUpdate
	}
	codec := protocol.NewCodec(lim, caps)

	out := bufio.NewWriterSize(stdout, 64<<10)
	status := 0
	err := eachLine(stdin, func(lineNo int, line []byte) error {
		var res []byte
		var ferr error
		if encode {
			res, ferr = frameEncodeLine(codec, line)
		} else {
			res, ferr = frameDecodeLine(codec, line)
		}
		if ferr != nil {
			code := protocol.CodeMalformedFrame
			var e *protocol.Error
			if errors.As(ferr, &e) {
				code = e.Code
			} else {
				status = 1 // not a frame at all
			}
			fmt.Fprintf(stderr, "line %d: %v\n", lineNo, ferr)
			res = append(append([]byte(`{"error":"`), code...), `"}`...)
		}
		_, werr := out.Write(append(res, '\n'))
		return werr
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "nmcr frame: %v\n", err)
		return 1
	}
	return status
}

func frameDecodeLine(codec protocol.Codec, line []byte) ([]byte, error) {
	msg, err := decodeHexLine(line)
	if err != nil {
		return nil, fmt.Errorf("not hex: %w", err)
	}
	f, err := codec.Decode(msg)
	if err != nil {
		return nil, err
	}
	return protocol.AppendFrameJSON(nil, f), nil
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
