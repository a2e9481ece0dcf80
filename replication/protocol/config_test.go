package protocol

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestS17_Defaults: the defaults of the contract and docs/protocol.md#limits-and-defaults,
// written out, and valid.
func TestS17_Defaults(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"generation", c.Generation, GenerationV2},
		{"maxInFlightUpdates", c.MaxInFlightUpdates, 32},
		{"maxUpdateBytes", c.MaxUpdateBytes, 524288},
		{"maxSyncDiffBytes", c.MaxSyncDiffBytes, 524288},
		{"maxBootstrapBytes", c.MaxBootstrapBytes, 524288},
		{"protocol overhead", c.ProtocolOverheadBytes, 1024},
		{"maxFrameBytes", c.MaxFrameBytes, 525312},
		{"maxQueuedUpdateBytes", c.MaxQueuedUpdateBytes, 4194304},
		{"maxQueuedUpdateCount", c.MaxQueuedUpdateCount, 1024},
		{"maxQueuedControlBytes", c.MaxQueuedControlBytes, 8388608},
		{"maxQueuedBytesPerConnection", c.MaxQueuedBytesPerConnection, 8388608},
		{"highWater", c.HighWaterBytes, 1048576},
		{"lowWater", c.LowWaterBytes, 262144},
		{"early frames", c.MaxEarlyFrames, 16},
		{"concurrent OPENs", c.MaxConcurrentOpens, 4},
		{"maxChunkedUpdateBytes", c.MaxChunkedUpdateBytes, 4194304},
		{"maxChunkedBootstrapBytes", c.MaxChunkedBootstrapBytes, 4194304},
		{"maxChunkedSyncDiffBytes", c.MaxChunkedSyncDiffBytes, 4194304},
		{"maxChunksPerUpdate", c.MaxChunksPerUpdate, 64},
		{"maxConcurrentAssembliesPerConnection", c.MaxConcurrentAssembliesPerConnection, 4},
		{"helloTimeoutMs", c.HelloTimeout, 10000 * time.Millisecond},
		{"authTimeoutMs", c.AuthTimeout, 10000 * time.Millisecond},
		{"openTimeoutMs", c.OpenTimeout, 15000 * time.Millisecond},
		{"bootstrapTimeoutMs", c.BootstrapTimeout, 60000 * time.Millisecond},
		{"reconcileTimeoutMs", c.ReconcileTimeout, 60000 * time.Millisecond},
		{"reconcileIntervalMs", c.ReconcileInterval, 300000 * time.Millisecond},
		{"closeTimeoutMs", c.CloseTimeout, 10000 * time.Millisecond},
		{"ackTimeoutMs", c.AckTimeout, 30000 * time.Millisecond},
		{"assemblyTimeoutMs", c.AssemblyTimeout, 30000 * time.Millisecond},
		{"pingIntervalMs", c.PingInterval, 30000 * time.Millisecond},
		{"pongTimeoutMs", c.PongTimeout, 10000 * time.Millisecond},
		{"baseBackoffMs", c.BaseBackoff, 250 * time.Millisecond},
		{"maxBackoffMs", c.MaxBackoff, 30000 * time.Millisecond},
		{"backoffResetAfterMs", c.BackoffResetAfter, 60000 * time.Millisecond},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

// TestS17_EveryConstraintIsEnforced breaks each start-up constraint of
// docs/protocol.md#backpressure and docs/protocol.md#timeouts alone and expects a loud error
// naming it; Validate never changes the configuration.
func TestS17_EveryConstraintIsEnforced(t *testing.T) {
	cases := []struct {
		constraint string
		mut        func(c *Config)
	}{
		{"maxBootstrapBytes <= maxFrameBytes - protocol overhead", func(c *Config) { c.MaxBootstrapBytes = c.MaxFrameBytes - c.ProtocolOverheadBytes + 1 }},
		{"maxSyncDiffBytes <= maxFrameBytes - protocol overhead", func(c *Config) { c.MaxSyncDiffBytes = c.MaxFrameBytes }},
		{"maxUpdateBytes <= maxFrameBytes - protocol overhead", func(c *Config) { c.ProtocolOverheadBytes = 2048 }},
		{"maxQueuedUpdateBytes >= maxUpdateBytes", func(c *Config) { c.MaxQueuedUpdateBytes = c.MaxUpdateBytes - 1; c.MaxChunkedUpdateBytes = 1 }},
		{"maxInFlightUpdates >= 1", func(c *Config) { c.MaxInFlightUpdates = 0 }},
		{"maxQueuedControlBytes >= maxBootstrapBytes + protocol overhead", func(c *Config) { c.MaxQueuedControlBytes = c.MaxBootstrapBytes + c.ProtocolOverheadBytes - 1 }},
		{"maxQueuedBytesPerConnection >= highWater", func(c *Config) { c.MaxQueuedBytesPerConnection = c.HighWaterBytes - 1 }},
		{"maxChunkedUpdateBytes <= maxQueuedUpdateBytes", func(c *Config) { c.MaxChunkedUpdateBytes = c.MaxQueuedUpdateBytes + 1 }},
		{"maxChunkedUpdateBytes <= maxChunksPerUpdate * maxUpdateBytes", func(c *Config) { c.MaxChunksPerUpdate = 7 }},
		{"maxChunkedBootstrapBytes <= maxChunksPerUpdate * maxUpdateBytes", func(c *Config) { c.MaxChunkedBootstrapBytes = 64*c.MaxUpdateBytes + 1 }},
		{"maxChunkedSyncDiffBytes <= maxChunksPerUpdate * maxUpdateBytes", func(c *Config) { c.MaxChunkedSyncDiffBytes = 64*c.MaxUpdateBytes + 1 }},
		{"maxChunksPerUpdate >= 1", func(c *Config) { c.MaxChunksPerUpdate = 0 }},
		{"maxConcurrentAssembliesPerConnection >= 1", func(c *Config) { c.MaxConcurrentAssembliesPerConnection = 0 }},
		{"assemblyTimeoutMs is a finite safe integer > 0", func(c *Config) { c.AssemblyTimeout = 0 }},
		{"assemblyTimeoutMs is a finite safe integer > 0", func(c *Config) { c.AssemblyTimeout = 1500 * time.Microsecond }},
		{"helloTimeoutMs is a finite safe integer > 0", func(c *Config) { c.HelloTimeout = -time.Second }},
		{"openTimeoutMs is a finite safe integer > 0", func(c *Config) { c.OpenTimeout = 0 }},
		{"bootstrapTimeoutMs is a finite safe integer > 0", func(c *Config) { c.BootstrapTimeout = 0 }},
		{"reconcileTimeoutMs is a finite safe integer > 0", func(c *Config) { c.ReconcileTimeout = 0 }},
		{"reconcileIntervalMs is a finite safe integer > 0", func(c *Config) { c.ReconcileInterval = time.Nanosecond }},
		{"closeTimeoutMs is a finite safe integer > 0", func(c *Config) { c.CloseTimeout = 0 }},
		{"ackTimeoutMs is a finite safe integer > 0", func(c *Config) { c.AckTimeout = 0 }},
		{"authTimeoutMs is a finite safe integer > 0", func(c *Config) { c.AuthTimeout = 0 }},
		{"pingIntervalMs is a finite safe integer > 0", func(c *Config) { c.PingInterval = 0; c.PongTimeout = -1 * time.Millisecond }},
		{"pongTimeoutMs is a finite safe integer > 0", func(c *Config) { c.PongTimeout = 0 }},
		{"baseBackoffMs is a finite safe integer > 0", func(c *Config) { c.BaseBackoff = 0 }},
		{"maxBackoffMs is a finite safe integer > 0", func(c *Config) { c.MaxBackoff = 0 }},
		{"backoffResetAfterMs is a finite safe integer > 0", func(c *Config) { c.BackoffResetAfter = 0 }},
		{"low-water < high-water", func(c *Config) { c.LowWaterBytes = c.HighWaterBytes }},
		{"pongTimeoutMs < pingIntervalMs", func(c *Config) { c.PongTimeout = c.PingInterval }},
		{"protocol overhead >= the largest data frame's non-Yjs bytes", func(c *Config) { c.ProtocolOverheadBytes = MinProtocolOverheadBytes - 1 }},
		{"maxFrameBytes <= 20 + 2^32-1 (payloadLength is uint32)", func(c *Config) { c.MaxFrameBytes = math.MaxUint32 + 21 }},
		{"maxChunksPerUpdate <= 2^32-1 (a uint32 on the wire)", func(c *Config) { c.MaxChunksPerUpdate = math.MaxUint32 + 1 }},
		{"maxUpdateBytes >= 1", func(c *Config) { c.MaxUpdateBytes = 0 }},
		{"maxQueuedUpdateCount >= 1", func(c *Config) { c.MaxQueuedUpdateCount = 0 }},
		{"lowWater >= 0", func(c *Config) { c.LowWaterBytes = -1 }},
		{"generation is v1 or v2", func(c *Config) { c.Generation = 9 }},
	}
	for _, k := range cases {
		c := DefaultConfig()
		k.mut(&c)
		before := c
		err := c.Validate()
		if !reflect.DeepEqual(before, c) {
			t.Fatalf("%s: Validate changed the configuration", k.constraint)
		}
		if !slices.Contains(constraints(err), k.constraint) {
			t.Errorf("%s not reported; got %v", k.constraint, err)
		}
	}
}

func constraints(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			var ce *ConfigError
			if errors.As(e, &ce) {
				out = append(out, ce.Constraint)
			}
		}
	}
	return out
}

// TestS17_AllViolationsReported and the chunked chains on the merged configuration: lowering
// maxUpdateBytes alone breaks chain ② with the default chunked caps (see docs/decisions.md).
func TestS17_AllViolationsReported(t *testing.T) {
	c := DefaultConfig()
	c.PongTimeout = c.PingInterval
	c.LowWaterBytes = c.HighWaterBytes + 1
	if got := constraints(c.Validate()); len(got) != 2 {
		t.Fatalf("got %v, want both violations", got)
	}
	c = DefaultConfig()
	c.MaxUpdateBytes = 8 << 10
	got := constraints(c.Validate())
	if !slices.Contains(got, "maxChunkedUpdateBytes <= maxChunksPerUpdate * maxUpdateBytes") {
		t.Fatalf("merged chain not checked: %v", got)
	}
	c.MaxChunkedUpdateBytes, c.MaxChunkedBootstrapBytes, c.MaxChunkedSyncDiffBytes = 512<<10, 512<<10, 512<<10
	if err := c.Validate(); err != nil {
		t.Fatalf("consistent lowered config: %v", err)
	}
}

func TestS17_MinProtocolOverheadCoversEveryDataFrame(t *testing.T) {
	cfg := DefaultConfig()
	full := make([]byte, cfg.MaxUpdateBytes)
	for _, m := range []Message{
		&Update{NamespaceID: nsA, Update: full},
		&SyncStep2{NamespaceID: nsA, SyncRoundID: math.MaxUint32, RelatedStep1Sequence: math.MaxUint32, Update: full},
		&BootstrapSnapshot{NamespaceID: nsA, ReplicationID: replID, ReplicationEpoch: 1<<53 - 1, Snapshot: full},
		&UpdateChunk{Kind: KindSnapshot, NamespaceID: nsA, TransferID: math.MaxUint32, ChunkCount: math.MaxUint32,
			TotalBytes: math.MaxUint32, ReplicationID: replID, ReplicationEpoch: 1<<53 - 1, Bytes: full},
	} {
		if over := len(encode(t, 1, m)) - len(full); over > MinProtocolOverheadBytes {
			t.Errorf("%v: %d bytes around the Yjs bytes, MinProtocolOverheadBytes %d", m.Type(), over, MinProtocolOverheadBytes)
		}
	}
}

func TestS1_GenerationCapabilities(t *testing.T) {
	c := DefaultConfig()
	if c.Capabilities() != CapChunkedUpdate|CapNamespaceDeleted {
		t.Fatal("v2 generation offers CAP_CHUNKED_UPDATE and CAP_NAMESPACE_DELETED")
	}
	c.Generation = GenerationV1
	if c.Capabilities() != 0 || c.Offer().Capabilities != 0 || !slices.Equal(c.Offer().Versions, []uint64{1}) {
		t.Fatal("v1 generation offers no capability and the same protocol versions")
	}
}
