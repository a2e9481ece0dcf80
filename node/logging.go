package node

import (
	"io"
	"log/slog"
	"os"
)

// NewLogger returns a binary's logger, writing to w at level: JSON lines when format is
// "json", text lines (key=value, for people) when it is "text", and when it is empty, text
// if w is a terminal and JSON otherwise (a file, a pipe, a log collector). Every line
// carries component (hub or peer).
func NewLogger(w io.Writer, level, format, component string) *slog.Logger {
	l, _ := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	if format == "text" || format == "" && IsTerminal(w) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With(slog.String("component", component))
}

// IsTerminal reports whether w is a character device (a terminal), the test `isatty` makes.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
