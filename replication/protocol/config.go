package protocol

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nomicore/nomicore/lib0"
)

// Generation is the implementation generation (docs/protocol.md#generations): orthogonal to
// the protocol version, and visible on the wire only in the HELLO capability bits. The v1
// generation predates chunked transfers; v2 has them.
type Generation uint8

const (
	// GenerationV2 offers CAP_CHUNKED_UPDATE (this implementation's default).
	GenerationV2 Generation = 0
	// GenerationV1 behaves as the older implementation: HELLO offers no optional capability,
	// so UPDATE_CHUNK is never sent and 0x42 frames are rejected.
	GenerationV1 Generation = 1
)

// String returns "v1" or "v2".
func (g Generation) String() string {
	switch g {
	case GenerationV1:
		return "v1"
	case GenerationV2:
		return "v2"
	}
	return fmt.Sprintf("UNKNOWN_GENERATION_0x%02x", uint8(g))
}

// SupportedProtocolVersions are the protocol versions this implementation speaks, highest
// first.
var SupportedProtocolVersions = []uint64{1}

const (
	kiB = 1 << 10
	miB = 1 << 20
)

// MinProtocolOverheadBytes is the largest non-Yjs part of a data frame: the 20-byte envelope
// plus a first snapshot chunk's fields around its bytes (kind 1, namespaceId 36, transferId 5,
// chunkIndex 1, chunkCount 5, totalBytes 5, replicationId 33, replicationEpoch 8, length
// prefix 5). ProtocolOverheadBytes below it would let a frame carrying a full-size update
// exceed maxFrameBytes.
const MinProtocolOverheadBytes = 20 + 1 + 36 + 5 + 1 + 5 + 5 + 33 + 8 + 5

// Config holds every limit, timeout and generation switch of the replication protocol
// (docs/protocol.md#limits-and-defaults, docs/protocol.md#timeouts). Start from
// DefaultConfig, change fields, and call Validate at start-up: an invalid configuration is
// refused loudly, never clamped at run time.
type Config struct {
	// Generation selects the capability set offered in HELLO.
	Generation Generation
	// Presence offers this implementation's presence extension (CapPresence) besides the
	// generation's capabilities; v1 offers nothing, whatever it says. Off by default: the
	// binaries turn it on with --presence-relay on.
	Presence bool

	// Per-namespace limits.
	MaxInFlightUpdates   int // unacknowledged UPDATE (or chunked transfer) window per direction
	MaxUpdateBytes       int // one UPDATE, and one UPDATE_CHUNK's bytes
	MaxSyncDiffBytes     int // one single-frame SYNC_STEP2 diff
	MaxBootstrapBytes    int // one single-frame BOOTSTRAP_SNAPSHOT
	MaxQueuedUpdateBytes int // unsent updates of one namespace
	MaxQueuedUpdateCount int

	// Frame and connection limits.
	ProtocolOverheadBytes       int // allowance for envelope and fields around Yjs bytes
	MaxFrameBytes               int // one WebSocket message
	MaxQueuedControlBytes       int // reserved control-frame allowance
	MaxQueuedBytesPerConnection int // queued namespace bytes + unflushed socket bytes
	HighWaterBytes              int // unflushed socket bytes that pause dequeuing
	LowWaterBytes               int // ... and resume it
	MaxEarlyFrames              int // frames accepted before admission completes
	MaxConcurrentOpens          int // OPEN_NAMESPACE in admission at once

	// Chunked transfers.
	MaxChunkedUpdateBytes                int // totalBytes of a kind=0 transfer
	MaxChunkedBootstrapBytes             int // totalBytes of a kind=1 transfer
	MaxChunkedSyncDiffBytes              int // totalBytes of a kind=2 transfer
	MaxChunksPerUpdate                   int // chunkCount of any transfer
	MaxConcurrentAssembliesPerConnection int // receiving assemblies per connection, all kinds

	// Timeouts: each a positive whole number of milliseconds.
	HelloTimeout      time.Duration
	AuthTimeout       time.Duration
	OpenTimeout       time.Duration
	BootstrapTimeout  time.Duration
	ReconcileTimeout  time.Duration
	ReconcileInterval time.Duration
	CloseTimeout      time.Duration
	AckTimeout        time.Duration
	AssemblyTimeout   time.Duration // sliding: reset by every chunk received
	PingInterval      time.Duration
	PongTimeout       time.Duration

	// Reconnect backoff with full jitter.
	BaseBackoff       time.Duration
	MaxBackoff        time.Duration
	BackoffResetAfter time.Duration
}

// DefaultConfig returns the defaults of docs/protocol.md#limits-and-defaults: the contract's
// where it has one, else the values chosen here.
func DefaultConfig() Config {
	return Config{
		Generation: GenerationV2,

		MaxInFlightUpdates:   32,
		MaxUpdateBytes:       512 * kiB,
		MaxSyncDiffBytes:     512 * kiB,
		MaxBootstrapBytes:    512 * kiB,
		MaxQueuedUpdateBytes: 4 * miB,
		MaxQueuedUpdateCount: 1024,

		ProtocolOverheadBytes:       1 * kiB,
		MaxFrameBytes:               512*kiB + 1*kiB,
		MaxQueuedControlBytes:       8 * miB,
		MaxQueuedBytesPerConnection: 8 * miB,
		HighWaterBytes:              1 * miB,
		LowWaterBytes:               256 * kiB,
		MaxEarlyFrames:              16,
		MaxConcurrentOpens:          4,

		MaxChunkedUpdateBytes:                4 * miB,
		MaxChunkedBootstrapBytes:             4 * miB,
		MaxChunkedSyncDiffBytes:              4 * miB,
		MaxChunksPerUpdate:                   64,
		MaxConcurrentAssembliesPerConnection: 4,

		HelloTimeout:      10 * time.Second,
		AuthTimeout:       10 * time.Second,
		OpenTimeout:       15 * time.Second,
		BootstrapTimeout:  60 * time.Second,
		ReconcileTimeout:  60 * time.Second,
		ReconcileInterval: 300 * time.Second,
		CloseTimeout:      10 * time.Second,
		AckTimeout:        30 * time.Second,
		AssemblyTimeout:   30 * time.Second,
		PingInterval:      30 * time.Second,
		PongTimeout:       10 * time.Second,

		BaseBackoff:       250 * time.Millisecond,
		MaxBackoff:        30 * time.Second,
		BackoffResetAfter: 60 * time.Second,
	}
}

// ConfigError is one violated start-up constraint. Validate joins them with errors.Join.
type ConfigError struct {
	Constraint string // the constraint as the contract writes it
	Detail     string // the values that break it
}

func (e *ConfigError) Error() string {
	return "protocol config: " + e.Constraint + " violated: " + e.Detail
}

// Validate checks every start-up constraint of the contract, plus the ones the wire encoding
// imposes (sizes that must fit uint32 fields, an overhead that fits the largest data frame's
// fields). It reports all violations, each as a *ConfigError naming its constraint. The chunked
// chains are checked on the merged configuration, defaults included (see docs/decisions.md).
func (c *Config) Validate() error {
	var errs []error
	need := func(ok bool, constraint, format string, args ...any) {
		if !ok {
			errs = append(errs, &ConfigError{Constraint: constraint, Detail: fmt.Sprintf(format, args...)})
		}
	}
	if c.Generation != GenerationV1 && c.Generation != GenerationV2 {
		need(false, "generation is v1 or v2", "generation %d", c.Generation)
	}

	// Every size is positive (lowWater may be 0).
	for _, f := range []struct {
		name string
		v    int
	}{
		{"maxUpdateBytes", c.MaxUpdateBytes},
		{"maxSyncDiffBytes", c.MaxSyncDiffBytes}, {"maxBootstrapBytes", c.MaxBootstrapBytes},
		{"maxQueuedUpdateBytes", c.MaxQueuedUpdateBytes}, {"maxQueuedUpdateCount", c.MaxQueuedUpdateCount},
		{"maxFrameBytes", c.MaxFrameBytes}, {"maxQueuedControlBytes", c.MaxQueuedControlBytes},
		{"maxQueuedBytesPerConnection", c.MaxQueuedBytesPerConnection}, {"highWater", c.HighWaterBytes},
		{"maxEarlyFrames", c.MaxEarlyFrames}, {"maxConcurrentOpens", c.MaxConcurrentOpens},
		{"maxChunkedUpdateBytes", c.MaxChunkedUpdateBytes}, {"maxChunkedBootstrapBytes", c.MaxChunkedBootstrapBytes},
		{"maxChunkedSyncDiffBytes", c.MaxChunkedSyncDiffBytes},
	} {
		need(f.v >= 1, f.name+" >= 1", "%s = %d", f.name, f.v)
	}
	need(c.LowWaterBytes >= 0, "lowWater >= 0", "lowWater = %d", c.LowWaterBytes)

	// The contract's constraints on limits, in its order.
	room := c.MaxFrameBytes - c.ProtocolOverheadBytes
	need(c.MaxBootstrapBytes <= room, "maxBootstrapBytes <= maxFrameBytes - protocol overhead",
		"%d > %d - %d", c.MaxBootstrapBytes, c.MaxFrameBytes, c.ProtocolOverheadBytes)
	need(c.MaxSyncDiffBytes <= room, "maxSyncDiffBytes <= maxFrameBytes - protocol overhead",
		"%d > %d - %d", c.MaxSyncDiffBytes, c.MaxFrameBytes, c.ProtocolOverheadBytes)
	need(c.MaxUpdateBytes <= room, "maxUpdateBytes <= maxFrameBytes - protocol overhead",
		"%d > %d - %d", c.MaxUpdateBytes, c.MaxFrameBytes, c.ProtocolOverheadBytes)
	need(c.MaxQueuedUpdateBytes >= c.MaxUpdateBytes, "maxQueuedUpdateBytes >= maxUpdateBytes",
		"%d < %d", c.MaxQueuedUpdateBytes, c.MaxUpdateBytes)
	need(c.MaxInFlightUpdates >= 1, "maxInFlightUpdates >= 1", "%d", c.MaxInFlightUpdates)
	need(c.MaxQueuedControlBytes >= c.MaxBootstrapBytes+c.ProtocolOverheadBytes,
		"maxQueuedControlBytes >= maxBootstrapBytes + protocol overhead",
		"%d < %d + %d", c.MaxQueuedControlBytes, c.MaxBootstrapBytes, c.ProtocolOverheadBytes)
	need(c.MaxQueuedBytesPerConnection >= c.HighWaterBytes, "maxQueuedBytesPerConnection >= highWater",
		"%d < %d", c.MaxQueuedBytesPerConnection, c.HighWaterBytes)
	need(c.MaxChunkedUpdateBytes <= c.MaxQueuedUpdateBytes, "maxChunkedUpdateBytes <= maxQueuedUpdateBytes",
		"%d > %d", c.MaxChunkedUpdateBytes, c.MaxQueuedUpdateBytes)
	chunkRoom := int64(c.MaxChunksPerUpdate) * int64(c.MaxUpdateBytes)
	need(int64(c.MaxChunkedUpdateBytes) <= chunkRoom, "maxChunkedUpdateBytes <= maxChunksPerUpdate * maxUpdateBytes",
		"%d > %d * %d", c.MaxChunkedUpdateBytes, c.MaxChunksPerUpdate, c.MaxUpdateBytes)
	need(int64(c.MaxChunkedBootstrapBytes) <= chunkRoom, "maxChunkedBootstrapBytes <= maxChunksPerUpdate * maxUpdateBytes",
		"%d > %d * %d", c.MaxChunkedBootstrapBytes, c.MaxChunksPerUpdate, c.MaxUpdateBytes)
	need(int64(c.MaxChunkedSyncDiffBytes) <= chunkRoom, "maxChunkedSyncDiffBytes <= maxChunksPerUpdate * maxUpdateBytes",
		"%d > %d * %d", c.MaxChunkedSyncDiffBytes, c.MaxChunksPerUpdate, c.MaxUpdateBytes)
	need(c.MaxChunksPerUpdate >= 1, "maxChunksPerUpdate >= 1", "%d", c.MaxChunksPerUpdate)
	need(c.MaxConcurrentAssembliesPerConnection >= 1, "maxConcurrentAssembliesPerConnection >= 1",
		"%d", c.MaxConcurrentAssembliesPerConnection)
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"assemblyTimeoutMs", c.AssemblyTimeout},
		{"helloTimeoutMs", c.HelloTimeout}, {"authTimeoutMs", c.AuthTimeout}, {"openTimeoutMs", c.OpenTimeout},
		{"bootstrapTimeoutMs", c.BootstrapTimeout}, {"reconcileTimeoutMs", c.ReconcileTimeout},
		{"reconcileIntervalMs", c.ReconcileInterval}, {"closeTimeoutMs", c.CloseTimeout},
		{"ackTimeoutMs", c.AckTimeout}, {"pingIntervalMs", c.PingInterval}, {"pongTimeoutMs", c.PongTimeout},
		{"baseBackoffMs", c.BaseBackoff}, {"maxBackoffMs", c.MaxBackoff}, {"backoffResetAfterMs", c.BackoffResetAfter},
	} {
		need(validTimeout(f.v), f.name+" is a finite safe integer > 0",
			"%s = %v (must be a positive whole number of milliseconds)", f.name, f.v)
	}
	need(c.LowWaterBytes < c.HighWaterBytes, "low-water < high-water", "%d >= %d", c.LowWaterBytes, c.HighWaterBytes)

	// Between timeouts.
	need(c.PongTimeout < c.PingInterval, "pongTimeoutMs < pingIntervalMs", "%v >= %v", c.PongTimeout, c.PingInterval)

	// The wire encoding.
	need(c.ProtocolOverheadBytes >= MinProtocolOverheadBytes, "protocol overhead >= the largest data frame's non-Yjs bytes",
		"%d < %d", c.ProtocolOverheadBytes, MinProtocolOverheadBytes)
	need(int64(c.MaxFrameBytes) <= HeaderLen+math.MaxUint32, "maxFrameBytes <= 20 + 2^32-1 (payloadLength is uint32)",
		"%d", c.MaxFrameBytes)
	for _, f := range []struct {
		name string
		v    int
	}{
		{"maxChunkedUpdateBytes", c.MaxChunkedUpdateBytes}, {"maxChunkedBootstrapBytes", c.MaxChunkedBootstrapBytes},
		{"maxChunkedSyncDiffBytes", c.MaxChunkedSyncDiffBytes}, {"maxChunksPerUpdate", c.MaxChunksPerUpdate},
	} {
		need(int64(f.v) <= math.MaxUint32, f.name+" <= 2^32-1 (a uint32 on the wire)", "%s = %d", f.name, f.v)
	}
	return errors.Join(errs...)
}

// validTimeout: a finite safe integer > 0 of milliseconds.
func validTimeout(d time.Duration) bool {
	return d > 0 && d%time.Millisecond == 0 && d/time.Millisecond <= lib0.MaxSafeInteger
}

// Limits returns the frame limits the codec enforces.
func (c *Config) Limits() Limits {
	return Limits{
		MaxFrameBytes:     c.MaxFrameBytes,
		MaxUpdateBytes:    c.MaxUpdateBytes,
		MaxSyncDiffBytes:  c.MaxSyncDiffBytes,
		MaxBootstrapBytes: c.MaxBootstrapBytes,
	}
}

// Capabilities returns the optional capabilities the configured generation offers in HELLO
// and accepts in a HELLO from a peer.
func (c *Config) Capabilities() Capability {
	if c.Generation == GenerationV1 {
		return 0
	}
	if c.Presence {
		return CapChunkedUpdate | CapNamespaceDeleted | CapPresence
	}
	return CapChunkedUpdate | CapNamespaceDeleted
}

// Offer returns the handshake offer of this configuration.
func (c *Config) Offer() Offer {
	return Offer{Versions: SupportedProtocolVersions, Capabilities: c.Capabilities()}
}

// MaxChunkedBytes returns the cap on totalBytes for a transfer of kind k.
func (c *Config) MaxChunkedBytes(k ChunkKind) int { return k.rule().maxChunked(c) }
