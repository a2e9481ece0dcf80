// Package node is the wiring the hub and peer binaries share: command-line flags (each also
// from NOMICORE_* environment variables), JSON logs, the observer (slog and Prometheus),
// the data directory and its store, the admin listener, the peer's remembered targets, and
// the orderly shutdown of §21 with a process-level watchdog.
package node

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nomicore/nomicore/internal/envflag"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Common holds the flags both serving commands take.
type Common struct {
	LogLevel        string
	ShutdownTimeout time.Duration
	AdminToken      string
	AdminTokenFile  string
	MaxEventStreams int
	Protocol        protocol.Config
	generation      string
}

// RegisterCommon adds the shared flags to fs: logging, shutdown, the admin token, and every
// limit and timeout of the replication protocol (§17, §18, §15.1) with the defaults of
// GUIDE §6.
func RegisterCommon(fs *flag.FlagSet) *Common {
	c := &Common{Protocol: protocol.DefaultConfig()}
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error (JSON lines on stderr)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "watchdog: exit non-zero if the orderly shutdown takes longer")
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token the admin API requires (required when --admin-listen is not loopback; prefer --admin-token-file or NOMICORE_ADMIN_TOKEN)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "file holding the admin API bearer token")
	fs.IntVar(&c.MaxEventStreams, "max-event-streams", 64, "concurrent admin event streams")
	fs.StringVar(&c.generation, "generation", "v1", "implementation generation (§1): v1 (no UPDATE_CHUNK) or v2 (offers CAP_CHUNKED_UPDATE)")
	p := &c.Protocol
	intFlag := func(v *int, name, usage string) { fs.IntVar(v, name, *v, usage) }
	intFlag(&p.MaxInFlightUpdates, "max-in-flight-updates", "§17 unacknowledged UPDATEs per namespace and direction")
	intFlag(&p.MaxUpdateBytes, "max-update-bytes", "§17 bytes of one UPDATE")
	intFlag(&p.MaxSyncDiffBytes, "max-sync-diff-bytes", "§17 bytes of one single-frame SYNC_STEP2 diff")
	intFlag(&p.MaxBootstrapBytes, "max-bootstrap-bytes", "§17 bytes of one single-frame BOOTSTRAP_SNAPSHOT")
	intFlag(&p.MaxQueuedUpdateBytes, "max-queued-update-bytes", "§17 unsent update bytes per namespace")
	intFlag(&p.MaxQueuedUpdateCount, "max-queued-update-count", "§17 unsent updates per namespace")
	intFlag(&p.ProtocolOverheadBytes, "protocol-overhead-bytes", "§17 allowance for the envelope and fields around Yjs bytes")
	intFlag(&p.MaxFrameBytes, "max-frame-bytes", "§3 bytes of one WebSocket message")
	intFlag(&p.MaxQueuedControlBytes, "max-queued-control-bytes", "§17 unflushed control-frame bytes per connection")
	intFlag(&p.MaxQueuedBytesPerConnection, "max-queued-bytes-per-connection", "§17 queued plus unflushed bytes per connection")
	intFlag(&p.HighWaterBytes, "high-water-bytes", "§17 unflushed bytes that pause sending")
	intFlag(&p.LowWaterBytes, "low-water-bytes", "§17 unflushed bytes that resume sending")
	intFlag(&p.MaxEarlyFrames, "max-early-frames", "frames accepted before admission completes")
	intFlag(&p.MaxConcurrentOpens, "max-concurrent-opens", "OPEN_NAMESPACE in admission at once")
	intFlag(&p.MaxChunkedUpdateBytes, "max-chunked-update-bytes", "§10.3 totalBytes of a chunked live update (v2)")
	intFlag(&p.MaxChunkedBootstrapBytes, "max-chunked-bootstrap-bytes", "§8.1 totalBytes of a chunked snapshot (v2)")
	intFlag(&p.MaxChunkedSyncDiffBytes, "max-chunked-sync-diff-bytes", "§9.2 totalBytes of a chunked sync diff (v2)")
	intFlag(&p.MaxChunksPerUpdate, "max-chunks-per-update", "§10.3 chunks of one transfer (v2)")
	intFlag(&p.MaxConcurrentAssembliesPerConnection, "max-concurrent-assemblies", "§17 receiving chunk assemblies per connection (v2)")
	durFlag := func(v *time.Duration, name, usage string) { fs.DurationVar(v, name, *v, usage) }
	durFlag(&p.HelloTimeout, "hello-timeout", "§18 helloTimeoutMs")
	durFlag(&p.AuthTimeout, "auth-timeout", "§18 authTimeoutMs")
	durFlag(&p.OpenTimeout, "open-timeout", "§18 openTimeoutMs")
	durFlag(&p.BootstrapTimeout, "bootstrap-timeout", "§18 bootstrapTimeoutMs")
	durFlag(&p.ReconcileTimeout, "reconcile-timeout", "§18 reconcileTimeoutMs")
	durFlag(&p.ReconcileInterval, "reconcile-interval", "§9.4 reconcileIntervalMs (periodic reconciliation)")
	durFlag(&p.CloseTimeout, "close-timeout", "§18 closeTimeoutMs")
	durFlag(&p.AckTimeout, "ack-timeout", "§18 ackTimeoutMs")
	durFlag(&p.AssemblyTimeout, "assembly-timeout", "§18 assemblyTimeoutMs")
	durFlag(&p.PingInterval, "ping-interval", "§17 pingIntervalMs")
	durFlag(&p.PongTimeout, "pong-timeout", "§17 pongTimeoutMs")
	durFlag(&p.BaseBackoff, "base-backoff", "§15.1 baseBackoffMs")
	durFlag(&p.MaxBackoff, "max-backoff", "§15.1 maxBackoffMs")
	durFlag(&p.BackoffResetAfter, "backoff-reset-after", "§15.1 backoffResetAfterMs")
	return c
}

// Resolve finishes the flags after parsing: the generation, every §17/§18 start-up
// constraint (protocol.Config.Validate), the log level and the admin token file. The error
// is one line naming every violated constraint.
func (c *Common) Resolve() error {
	switch c.generation {
	case "v1":
		c.Protocol.Generation = protocol.GenerationV1
	case "v2":
		c.Protocol.Generation = protocol.GenerationV2
	default:
		return fmt.Errorf("--generation %q: want v1 or v2", c.generation)
	}
	if err := c.Protocol.Validate(); err != nil {
		return errors.New(OneLine(err))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("--shutdown-timeout must be positive")
	}
	if c.AdminTokenFile != "" {
		b, err := os.ReadFile(c.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("admin token file: %w", err)
		}
		c.AdminToken = strings.TrimSpace(string(b))
		if c.AdminToken == "" {
			return fmt.Errorf("admin token file %s is empty", c.AdminTokenFile)
		}
	}
	return nil
}

// OneLine joins a (possibly joined) error's lines with "; ".
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ; ")), " ")
}

// ParseFlags applies the NOMICORE_* environment to fs and then parses args (the command line
// wins). It returns 0 to go on, or the exit code: 0 after -h, 2 for bad usage (the message
// already written to stderr by the flag package or here).
func ParseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, stderr io.Writer) (int, bool) {
	fs.SetOutput(stderr)
	if err := envflag.Apply(fs, getenv); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 2, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// ParseLevel reads a --log-level value.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// NewLogger returns the JSON logger of a binary (slog JSON lines on w).
func NewLogger(w io.Writer, level string, side string) *slog.Logger {
	l, _ := ParseLevel(level)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})).With(slog.String("component", side))
}

// StringList is a repeatable flag; a value may also be a comma-separated list (so its
// NOMICORE_* variable can carry several).
type StringList []string

func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set adds the comma-separated values of v.
func (s *StringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}
