package framecap

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nomicore/nomicore/replication/protocol"
)

// LogTap returns a Tap that logs every message at DEBUG as one line, "frame": the
// connection id, the direction, the message type, its sequence, its size and, for a
// namespace message, the namespace id — never its bytes. A message that does not decode is
// logged with its error code instead. lim are the process's frame limits. LogTap returns nil
// when log does not log DEBUG (the caller then installs no tap at all).
func LogTap(log *slog.Logger, lim protocol.Limits) Tap {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	// Every capability, so that no message type is refused for not being negotiated.
	codec := protocol.NewCodec(lim, protocol.KnownCapabilities)
	return func(connectionID string, sent bool, msg []byte) {
		dir := In
		if sent {
			dir = Out
		}
		attrs := make([]slog.Attr, 0, 7)
		attrs = append(attrs, slog.String("connectionId", connectionID), slog.String("direction", dir), slog.Int("bytes", len(msg)))
		f, err := codec.Decode(msg)
		if err != nil {
			code := "MALFORMED_FRAME"
			var pe *protocol.Error
			if errors.As(err, &pe) {
				code = string(pe.Code)
			}
			attrs = append(attrs, slog.String("error", code))
			log.LogAttrs(context.Background(), slog.LevelDebug, "frame", attrs...)
			return
		}
		attrs = append(attrs, slog.String("frameType", f.Type().String()), slog.Uint64("sequence", uint64(f.Sequence)))
		if nm, ok := f.Message.(protocol.NamespaceMessage); ok {
			if ns := nm.Namespace(); !ns.IsZero() {
				attrs = append(attrs, slog.String("namespaceId", ns.String()))
			}
		}
		log.LogAttrs(context.Background(), slog.LevelDebug, "frame", attrs...)
	}
}
