package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestE2E_SlowLinkLong is the slow-link case at full size (make bench-slowlink): 6 MB queued
// toward a live peer over a 100 KB/s link, with the shipped liveness timers (a ping every
// 30 s, a 10 s pong timeout), a minute of transfer. The peer only receives meanwhile. The
// connection must stay up and the data arrive once; the time it took is reported.
func TestE2E_SlowLinkLong(t *testing.T) {
	if os.Getenv("NOMICORE_E2E_LONG") != "1" {
		t.Skip("a minute-long run: NOMICORE_E2E_LONG=1 (make bench-slowlink)")
	}
	f := newFaultEnv(t, "--ping-interval", "30s", "--pong-timeout", "10s")
	const rate, part = 100_000, 3_000_000
	f.proxy.SetBandwidth(rate)
	t0 := time.Now()
	first, second := strings.Repeat("a", part), strings.Repeat("b", part)
	f.hub.api().set(f.ns, map[string]any{"first": first})
	f.hub.api().set(f.ns, map[string]any{"second": second})
	eventually(t, 180*time.Second, "6 MB at peer-a", func() error {
		if n, _ := f.a.api().notes(f.ns); n["first"] != first || n["second"] != second {
			return fmt.Errorf("not yet; peer-a went %s", seq(since(transitions(t, f.a, "connection-state-changed", ""), t0)))
		}
		return nil
	})
	took := time.Since(t0)
	f.noReconnectSince(t0)
	s := f.proxy.Stats()
	t.Logf("slow link: %d bytes toward peer-a at %d B/s in %v (%.0f B/s), connection kept: %v; proxy %+v",
		s.BytesDown, rate, took.Round(time.Millisecond), float64(s.BytesDown)/took.Seconds(), !t.Failed(), s)
}
