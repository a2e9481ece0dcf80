package namespace

import (
	"testing"

	"github.com/nomicore/nomicore/observer"
)

// A channel opens for presence once live; the periodic reconciliation of a live channel
// keeps it open, while the first reconciliation, before the channel was ever live, does not
// open it; closing, failure and disconnection close it.
func TestPresenceOpenIn(t *testing.T) {
	for _, c := range []struct {
		st         observer.ChannelState
		open, want bool
	}{
		{observer.ChannelLive, false, true},
		{observer.ChannelNeedsResync, true, true},
		{observer.ChannelReconciling, true, true},
		{observer.ChannelReconciling, false, false},
		{observer.ChannelBootstrapping, false, false},
		{observer.ChannelClosing, true, false},
		{observer.ChannelFailed, true, false},
		{observer.ChannelConflicted, true, false},
		{observer.ChannelDisconnected, true, false},
	} {
		if got := presenceOpenIn(c.st, c.open); got != c.want {
			t.Errorf("%s (open before: %v): open %v, want %v", c.st, c.open, got, c.want)
		}
	}
}
