package node

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/procs"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Common holds the flags both serving commands take.
type Common struct {
	LogLevel        string
	LogFormat       string // "text", "json", or "" (text on a terminal, JSON otherwise)
	ShutdownTimeout time.Duration
	AdminToken      string
	AdminTokenFile  string
	MaxEventStreams int
	Capture         CaptureFlags
	TLS             TLSFlags
	Protocol        protocol.Config
	Procs           procs.Mode // --procs, set by Resolve
	generation      string
	procs           string
	flags           *cli.Flags
}

// Shipped chunked-transfer caps of the binaries, larger than the contract's defaults
// (protocol.DefaultConfig keeps those): a document up to 32 MiB bootstraps and catches up
// (64 chunks of 512 KiB), one live update up to 4 MiB.
const (
	ShippedMaxChunkedBootstrapBytes = 32 << 20
	ShippedMaxChunkedSyncDiffBytes  = 32 << 20
	ShippedMaxChunkedUpdateBytes    = 4 << 20
	ShippedMaxQueuedUpdateBytes     = 4 << 20
)

// ShippedConfig is the replication configuration the binaries start from: the contract's
// defaults, the v2 generation (chunked transfers), and the shipped chunked caps.
func ShippedConfig() protocol.Config {
	c := protocol.DefaultConfig()
	c.Generation = protocol.GenerationV2
	c.MaxChunkedBootstrapBytes = ShippedMaxChunkedBootstrapBytes
	c.MaxChunkedSyncDiffBytes = ShippedMaxChunkedSyncDiffBytes
	c.MaxChunkedUpdateBytes = ShippedMaxChunkedUpdateBytes
	c.MaxQueuedUpdateBytes = ShippedMaxQueuedUpdateBytes
	return c
}

// RegisterCommon adds the flags both serving commands share: logging, shutdown, the admin
// token, frame capture, and every limit and timeout of the replication protocol (with the
// shipped defaults, ShippedConfig; docs/operations.md says which ones bind together).
func RegisterCommon(f *cli.Flags) *Common {
	c := &Common{Protocol: ShippedConfig(), flags: f}
	f.Define("logging and diagnostics", func() {
		f.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error; debug adds a line per admin request and per update sent, applied or acknowledged")
		f.StringVar(&c.LogFormat, "log-format", "", "text or json (default: text when stderr is a terminal, json otherwise)")
		c.Capture.register(f)
	})
	f.Define("admin API", func() {
		f.StringVar(&c.AdminToken, "admin-token", "", "bearer `TOKEN` the admin API requires; required when --admin-listen is not loopback (prefer --admin-token-file or NOMICORE_ADMIN_TOKEN: a flag is visible in ps)")
		f.StringVar(&c.AdminTokenFile, "admin-token-file", "", "`FILE` holding the admin API's bearer token")
		f.IntVar(&c.MaxEventStreams, "max-event-streams", 64, "event streams (GET …/events) open at once")
		f.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "exit with status 3 if stopping takes longer than this")
	})
	c.TLS.register(f)
	f.Define("processors", func() {
		f.StringVar(&c.procs, "procs", "auto", "processors to run on, `MODE`: auto (one while that is enough, every core as soon as it is saturated: "+
			"the least CPU for a light load), all (every core, always), or a number; GOMAXPROCS in the environment overrides it")
	})
	p := &c.Protocol
	intFlag := func(v *int, name, usage string) { f.IntVar(v, name, *v, usage) }
	durFlag := func(v *time.Duration, name, usage string) { f.DurationVar(v, name, *v, usage) }
	f.Define("replication limits (give hub and peers the same values; docs/operations.md lists which ones bind together)", func() {
		f.StringVar(&c.generation, "generation", "v2", "protocol generation: v2 (a document, catch-up or update too large for one message travels in chunks) or v1 (the older behaviour: every transfer in one message, so documents and catch-ups over --max-bootstrap-bytes / --max-sync-diff-bytes fail); a v1 side makes its connections v1")
		intFlag(&p.MaxFrameBytes, "max-frame-bytes", "largest WebSocket message sent or accepted, in bytes (a proxy in between must allow it)")
		intFlag(&p.MaxUpdateBytes, "max-update-bytes", "largest document update sent in one message, and the size of each chunk, in bytes; with --generation v1 a larger local write is refused with 413")
		intFlag(&p.MaxSyncDiffBytes, "max-sync-diff-bytes", "largest catch-up difference sent in one message, in bytes")
		intFlag(&p.MaxBootstrapBytes, "max-bootstrap-bytes", "largest document a new replica can receive in one message, in bytes")
		intFlag(&p.ProtocolOverheadBytes, "protocol-overhead-bytes", "room kept in every message for the fields around the document bytes")
		intFlag(&p.MaxInFlightUpdates, "max-in-flight-updates", "updates of one namespace sent and not yet acknowledged, per direction")
		intFlag(&p.MaxQueuedUpdateBytes, "max-queued-update-bytes", "bytes of updates waiting to be sent, per namespace; beyond it the queue is dropped and the namespace catches up again")
		intFlag(&p.MaxQueuedUpdateCount, "max-queued-update-count", "updates waiting to be sent, per namespace (the same overflow policy)")
		intFlag(&p.MaxQueuedControlBytes, "max-queued-control-bytes", "control messages not yet written to the socket, per connection; beyond it the connection closes")
		intFlag(&p.MaxQueuedBytesPerConnection, "max-queued-bytes-per-connection", "queued and unwritten bytes per connection; beyond it the largest namespace queues are dropped")
		intFlag(&p.HighWaterBytes, "high-water-bytes", "unwritten bytes on a connection that pause sending")
		intFlag(&p.LowWaterBytes, "low-water-bytes", "unwritten bytes at which sending resumes")
		intFlag(&p.MaxEarlyFrames, "max-early-frames", "messages a connection may send before its namespace is admitted")
		intFlag(&p.MaxConcurrentOpens, "max-concurrent-opens", "namespaces one connection may be opening at once")
		intFlag(&p.MaxChunkedUpdateBytes, "max-chunked-update-bytes", "largest live update, in bytes: a larger local write is refused with 413 (v2; at most --max-queued-update-bytes)")
		intFlag(&p.MaxChunkedBootstrapBytes, "max-chunked-bootstrap-bytes", "largest document a new replica can receive, in bytes (v2; at most --max-chunks-per-update × --max-update-bytes)")
		intFlag(&p.MaxChunkedSyncDiffBytes, "max-chunked-sync-diff-bytes", "largest catch-up difference, in bytes, e.g. what a peer missed while offline (v2; same bound)")
		intFlag(&p.MaxChunksPerUpdate, "max-chunks-per-update", "chunks of one transfer (v2)")
		intFlag(&p.MaxConcurrentAssembliesPerConnection, "max-concurrent-assemblies", "chunked transfers one connection may be receiving (and sending) at once; each holds a buffer of its size (v2)")
	})
	f.Define("replication timeouts", func() {
		durFlag(&p.HelloTimeout, "hello-timeout", "time a new connection has to introduce itself")
		durFlag(&p.AuthTimeout, "auth-timeout", "time the token check may take before the connection is refused")
		durFlag(&p.OpenTimeout, "open-timeout", "time a namespace has to open")
		durFlag(&p.BootstrapTimeout, "bootstrap-timeout", "time a new replica has to receive its document (extended while a large one keeps arriving)")
		durFlag(&p.ReconcileTimeout, "reconcile-timeout", "time a catch-up exchange may take")
		durFlag(&p.ReconcileInterval, "reconcile-interval", "how often a live namespace compares its state with the other side, to catch anything missed")
		durFlag(&p.CloseTimeout, "close-timeout", "time a closing namespace or connection waits for the other side")
		durFlag(&p.AckTimeout, "ack-timeout", "time an update waits for its acknowledgement before the namespace catches up again")
		durFlag(&p.AssemblyTimeout, "assembly-timeout", "time a chunked transfer may go without a chunk before the receiver gives it up (v2)")
		durFlag(&p.PingInterval, "ping-interval", "how often a connection checks that the other side is still there")
		durFlag(&p.PongTimeout, "pong-timeout", "time the other side has to answer that check before the connection is dropped")
		durFlag(&p.BaseBackoff, "base-backoff", "a peer's first reconnect delay (it doubles, with jitter, up to --max-backoff)")
		durFlag(&p.MaxBackoff, "max-backoff", "a peer's longest reconnect delay")
		durFlag(&p.BackoffResetAfter, "backoff-reset-after", "time a peer must stay connected before its reconnect delay starts again from --base-backoff")
	})
	return c
}

// Resolve finishes the flags after parsing: the generation, the processors, every start-up
// constraint of the limits and timeouts (protocol.Config.Validate, in flag names), the log
// level and format, the capture flags and the admin token file. The error is one line
// naming every problem.
func (c *Common) Resolve() error {
	switch c.generation {
	case "v1":
		c.Protocol.Generation = protocol.GenerationV1
	case "v2":
		c.Protocol.Generation = protocol.GenerationV2
	default:
		return fmt.Errorf("--generation %q: want v1 or v2", c.generation)
	}
	mode, err := procs.ParseMode(c.procs)
	if err != nil {
		return err
	}
	c.Procs = mode
	c.followChunkedCaps()
	if err := c.Protocol.Validate(); err != nil {
		return errors.New(ConfigProblems(err))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if err := c.Capture.check(); err != nil {
		return err
	}
	if err := c.TLS.check(); err != nil {
		return err
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("--shutdown-timeout must be positive")
	}
	if c.AdminTokenFile != "" {
		b, err := os.ReadFile(c.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		c.AdminToken = strings.TrimSpace(string(b))
		if c.AdminToken == "" {
			return fmt.Errorf("--admin-token-file %s is empty", c.AdminTokenFile)
		}
	}
	return nil
}

// followChunkedCaps lowers the chunked caps left at their shipped defaults to what the
// flags given allow: --max-chunks-per-update × --max-update-bytes, and for live updates
// --max-queued-update-bytes. Lowering --max-update-bytes alone then works as it did before
// the binaries shipped larger caps (the chains of docs/protocol.md#start-up-constraints bind
// the chunked keys an operator sets, not their defaults); a cap given explicitly is checked
// as given.
func (c *Common) followChunkedCaps() {
	set := map[string]bool{}
	if c.flags != nil {
		c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	p := &c.Protocol
	room := p.MaxChunksPerUpdate * p.MaxUpdateBytes
	if p.MaxChunksPerUpdate < 1 || p.MaxUpdateBytes < 1 {
		return // refused by Validate
	}
	follow := func(v *int, name string, bound int) {
		if !set[name] && *v > bound && bound >= 1 {
			*v = bound
		}
	}
	follow(&p.MaxChunkedBootstrapBytes, "max-chunked-bootstrap-bytes", room)
	follow(&p.MaxChunkedSyncDiffBytes, "max-chunked-sync-diff-bytes", room)
	follow(&p.MaxChunkedUpdateBytes, "max-chunked-update-bytes", min(room, p.MaxQueuedUpdateBytes))
}

// contractFlags maps the contract's names of the limits and timeouts, as
// protocol.Config.Validate words its constraints, to the flags that set them.
var contractFlags = map[string]string{
	"maxUpdateBytes": "--max-update-bytes", "maxSyncDiffBytes": "--max-sync-diff-bytes",
	"maxBootstrapBytes": "--max-bootstrap-bytes", "maxQueuedUpdateBytes": "--max-queued-update-bytes",
	"maxQueuedUpdateCount": "--max-queued-update-count", "maxFrameBytes": "--max-frame-bytes",
	"maxQueuedControlBytes": "--max-queued-control-bytes", "maxQueuedBytesPerConnection": "--max-queued-bytes-per-connection",
	"highWater": "--high-water-bytes", "lowWater": "--low-water-bytes", "high-water": "--high-water-bytes",
	"low-water": "--low-water-bytes", "maxEarlyFrames": "--max-early-frames", "maxConcurrentOpens": "--max-concurrent-opens",
	"maxChunkedUpdateBytes": "--max-chunked-update-bytes", "maxChunkedBootstrapBytes": "--max-chunked-bootstrap-bytes",
	"maxChunkedSyncDiffBytes": "--max-chunked-sync-diff-bytes", "maxChunksPerUpdate": "--max-chunks-per-update",
	"maxConcurrentAssembliesPerConnection": "--max-concurrent-assemblies", "maxInFlightUpdates": "--max-in-flight-updates",
	"assemblyTimeoutMs": "--assembly-timeout", "helloTimeoutMs": "--hello-timeout", "authTimeoutMs": "--auth-timeout",
	"openTimeoutMs": "--open-timeout", "bootstrapTimeoutMs": "--bootstrap-timeout", "reconcileTimeoutMs": "--reconcile-timeout",
	"reconcileIntervalMs": "--reconcile-interval", "closeTimeoutMs": "--close-timeout", "ackTimeoutMs": "--ack-timeout",
	"pingIntervalMs": "--ping-interval", "pongTimeoutMs": "--pong-timeout", "baseBackoffMs": "--base-backoff",
	"maxBackoffMs": "--max-backoff", "backoffResetAfterMs": "--backoff-reset-after",
}

var contractName = regexp.MustCompile(`[a-z][A-Za-z]*(-water)?`)

// ConfigProblems words the violations protocol.Config.Validate reports in flag names, one
// clause per violation: "--max-update-bytes <= --max-frame-bytes - --protocol-overhead-bytes
// does not hold (600000 > 525312 - 1024)".
func ConfigProblems(err error) string {
	var parts []string
	var visit func(error)
	visit = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				visit(e)
			}
			return
		}
		var ce *protocol.ConfigError
		if !errors.As(err, &ce) {
			parts = append(parts, OneLine(err))
			return
		}
		rename := func(s string) string {
			s = strings.ReplaceAll(s, "protocol overhead", "--protocol-overhead-bytes")
			s = strings.ReplaceAll(s, " is a finite safe integer > 0", " > 0")
			return contractName.ReplaceAllStringFunc(s, func(w string) string {
				if f, ok := contractFlags[w]; ok {
					return f
				}
				return w
			})
		}
		parts = append(parts, rename(ce.Constraint)+" does not hold ("+rename(ce.Detail)+")")
	}
	visit(err)
	return strings.Join(parts, "; ")
}

// OneLine joins a (possibly joined) error's lines with "; ".
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ; ")), " ")
}

// ParseLevel reads a --log-level value.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
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
