package node

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/framecap"
	"github.com/nomicore/nomicore/replication/protocol"
)

// CaptureFlags are --capture-frames FILE and --capture-max-bytes N.
type CaptureFlags struct {
	File     string
	MaxBytes int64
}

func (c *CaptureFlags) register(f *cli.Flags) {
	f.StringVar(&c.File, "capture-frames", "", "write every replication message of every connection to `FILE`, one hex line each, for \"nmcr frame decode < FILE\" (off by default; the file holds document content and is created with mode 0600)")
	f.Int64Var(&c.MaxBytes, "capture-max-bytes", framecap.DefaultMaxBytes, "stop writing --capture-frames once the file reaches this size, in bytes")
}

func (c *CaptureFlags) check() error {
	if c.MaxBytes <= 0 {
		return errors.New("--capture-max-bytes must be positive")
	}
	if c.File != "" && !frameHookAvailable {
		return errors.New("--capture-frames: this build cannot capture frames yet (the replication connection layer offers no frame hook)")
	}
	return nil
}

// frameHookAvailable says whether the replication connection layer calls a frame hook (a
// framecap.Tap in the hub's and the peer's options, ws.HubOptions.FrameTap and
// ws.PeerOptions.FrameTap) for every message it reads and writes. Without it,
// --capture-frames would refuse to start and --log-level debug would log no per-message
// lines.
const frameHookAvailable = true

// FrameTap returns what the replication connection layer should call with every message of
// every connection: the capture file's writer when --capture-frames is set, and a DEBUG line
// per message when the log level is debug; nil when neither is wanted. who names the
// process in the capture file's header. close ends the capture (a no-op without one); call
// it after the replication layer has stopped.
func (c *Common) FrameTap(log *slog.Logger, who string) (tap framecap.Tap, close func() error, err error) {
	close = func() error { return nil }
	if !frameHookAvailable {
		return nil, close, nil
	}
	if c.Capture.File != "" {
		w, err := framecap.Create(c.Capture.File, who, c.Capture.MaxBytes, nil)
		if err != nil {
			return nil, close, fmt.Errorf("--capture-frames: %w", err)
		}
		tap, close = w.Tap, w.Close
		log.Warn("capturing every replication message, document content included", slog.String("file", c.Capture.File),
			slog.Int64("maxBytes", c.Capture.MaxBytes))
	}
	return framecap.Both(tap, framecap.LogTap(log, c.limits())), close, nil
}

func (c *Common) limits() protocol.Limits { return c.Protocol.Limits() }
