package cluster

import (
	"strconv"
	"strings"

	"github.com/nomicore/nomicore/changefeed"
)

// The cursor of a cluster's change feed names a position in each log stream (streams.go):
//
//	c1.<NOMICORE_LOG>[.<NOMICORE_LOG_1>[.<NOMICORE_LOG_2>…]]
//
// "c1" says the form (a later form takes another prefix), then the stream positions in
// decimal, log stream 0 first, without the trailing zeros (a stream the cursor does not
// name is at 0: the reader reads all of it). It is short, URL-safe (digits, dots, one
// letter) and reads the same on every node. A plain decimal number is the cursor of the
// feed before it followed more than NOMICORE_LOG — saved by a webhook endpoint, the
// versions scheduler or a reader — and means that position in NOMICORE_LOG and 0 in every
// other stream: exact, since no other stream existed then.
const (
	feedCursorPrefix = "c1."
	// maxFeedCursorLen bounds a cursor read: every stream at the largest position.
	maxFeedCursorLen = len(feedCursorPrefix) + maxLogStreams*21
	feedCursorWant   = `a token "c1." followed by numbers, or a whole number`
)

// feedPos is a position in the cluster's feed: the position in log stream k at index k
// (0 beyond the end).
type feedPos []uint64

// at returns the position in log stream k.
func (p feedPos) at(k int) uint64 {
	if k < len(p) {
		return p[k]
	}
	return 0
}

// set puts v as the position in log stream k, growing p as needed.
func (p *feedPos) set(k int, v uint64) {
	for len(*p) <= k {
		*p = append(*p, 0)
	}
	(*p)[k] = v
}

// cursor encodes p.
func (p feedPos) cursor() changefeed.Cursor {
	n := len(p)
	for n > 1 && p[n-1] == 0 {
		n--
	}
	b := make([]byte, 0, len(feedCursorPrefix)+n*8)
	b = append(b, feedCursorPrefix...)
	for k := range n {
		if k > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, p[k], 10)
	}
	if n == 0 {
		b = append(b, '0')
	}
	return changefeed.Cursor(b)
}

// parseFeedCursor reads a cursor of the cluster's feed, or a plain decimal one of before
// (see above). It never panics and allocates at most for maxLogStreams positions.
func parseFeedCursor(s string) (feedPos, error) {
	bad := &changefeed.BadCursorError{Cursor: s, Want: feedCursorWant}
	if s == "" || len(s) > maxFeedCursorLen {
		return nil, bad
	}
	if s[0] >= '0' && s[0] <= '9' {
		v, ok := parseDecimal(s)
		if !ok {
			return nil, bad
		}
		return feedPos{v}, nil
	}
	rest, ok := strings.CutPrefix(s, feedCursorPrefix)
	if !ok {
		return nil, bad
	}
	if strings.Count(rest, ".") >= maxLogStreams {
		return nil, bad
	}
	var p feedPos
	for f := range strings.SplitSeq(rest, ".") {
		v, ok := parseDecimal(f)
		if !ok {
			return nil, bad
		}
		p = append(p, v)
	}
	for len(p) > 1 && p[len(p)-1] == 0 {
		p = p[:len(p)-1]
	}
	return p, nil
}

// parseDecimal reads a number of decimal digits only (no sign, no space), up to 2^64-1.
func parseDecimal(s string) (uint64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
