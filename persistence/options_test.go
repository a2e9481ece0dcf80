package persistence

import (
	"testing"
	"time"
)

// The two commit delays: defaults, "at once", and an unawaited delay never below the other.
func TestCommitDelayDefaults(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		commit, unawaited         time.Duration
		wantCommit, wantUnawaited time.Duration
	}{
		{0, 0, DefaultCommitDelay, DefaultUnawaitedCommitDelay},
		{-1, 0, 0, 0},                    // at once stays at once
		{-1, 5 * ms, 0, 5 * ms},          // unless asked otherwise
		{30 * ms, 0, 30 * ms, 30 * ms},   // the default unawaited delay is never below CommitDelay
		{3 * ms, 1 * ms, 3 * ms, 3 * ms}, // nor a given one
		{1 * ms, 30 * ms, 1 * ms, 30 * ms},
	} {
		o, err := Options{CommitDelay: tc.commit, UnawaitedCommitDelay: tc.unawaited}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.CommitDelay != tc.wantCommit || o.UnawaitedCommitDelay != tc.wantUnawaited {
			t.Errorf("CommitDelay %v, UnawaitedCommitDelay %v: got %v and %v, want %v and %v",
				tc.commit, tc.unawaited, o.CommitDelay, o.UnawaitedCommitDelay, tc.wantCommit, tc.wantUnawaited)
		}
	}
}
