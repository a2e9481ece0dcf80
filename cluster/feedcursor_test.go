package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/changefeed"
)

// TestFeedCursor: the cluster's cursor reads back as the positions it was made of; a plain
// decimal number is that position in NOMICORE_LOG; garbage is a *BadCursorError.
func TestFeedCursor(t *testing.T) {
	for _, c := range []struct {
		pos  feedPos
		want changefeed.Cursor
	}{
		{nil, "c1.0"},
		{feedPos{0}, "c1.0"},
		{feedPos{7}, "c1.7"},
		{feedPos{7, 0, 0}, "c1.7"},
		{feedPos{0, 0, 3}, "c1.0.0.3"},
		{feedPos{12, 5, 40}, "c1.12.5.40"},
		{feedPos{1<<64 - 1, 1}, "c1.18446744073709551615.1"},
	} {
		if got := c.pos.cursor(); got != c.want {
			t.Errorf("%v.cursor() = %q, want %q", c.pos, got, c.want)
		}
		back, err := parseFeedCursor(string(c.want))
		if err != nil {
			t.Fatalf("parseFeedCursor(%q): %v", c.want, err)
		}
		for k := range 4 {
			if back.at(k) != c.pos.at(k) {
				t.Errorf("parseFeedCursor(%q) at %d = %d, want %d", c.want, k, back.at(k), c.pos.at(k))
			}
		}
	}
	// A cursor of before: that position in NOMICORE_LOG, 0 in every other stream.
	for in, want := range map[string]feedPos{"0": {0}, "42": {42}, "0042": {42}, "c1.42.0": {42}, "c1.0.0.9": {0, 0, 9}} {
		got, err := parseFeedCursor(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseFeedCursor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	long := "c1." + strings.Repeat("1.", maxLogStreams-1) + "1"
	if p, err := parseFeedCursor(long); err != nil || len(p) != maxLogStreams {
		t.Errorf("a position in each of %d streams: %v, %v", maxLogStreams, len(p), err)
	}
	for _, in := range []string{
		"", "c1.", "c1", "c2.5", "C1.5", "c1.5.", "c1..5", "c1.-5", "c1.+5", "c1.5x", "c1. 5", "-1", "+1", " 1",
		"1.5", "c1.18446744073709551616", "18446744073709551616", "c1.1e3", "c1.0x10", "x", "c1.5\x00",
		long + ".1", // more streams than a cluster has
		"c1." + strings.Repeat("9", maxFeedCursorLen),
	} {
		_, err := parseFeedCursor(in)
		var bad *changefeed.BadCursorError
		if !errors.As(err, &bad) || !errors.Is(err, changefeed.ErrBadCursor) || bad.Cursor != in {
			t.Errorf("parseFeedCursor(%q): %v; want a *BadCursorError", in, err)
		}
	}
}

// FuzzFeedCursor: the decoder never panics, and whatever it accepts encodes to a cursor
// that reads back the same.
func FuzzFeedCursor(f *testing.F) {
	for _, s := range []string{"c1.0", "c1.1.2.3", "17", "c1.", "c2.1", "c1.18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseFeedCursor(s)
		if err != nil {
			if !errors.Is(err, changefeed.ErrBadCursor) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if len(p) == 0 || len(p) > maxLogStreams {
			t.Fatalf("%q: %d positions", s, len(p))
		}
		c := p.cursor()
		q, err := parseFeedCursor(string(c))
		if err != nil || !slices.Equal(p, q) || q.cursor() != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, p, c, q, err)
		}
	})
}
