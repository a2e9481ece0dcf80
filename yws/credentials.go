package yws

import (
	"slices"
	"strings"
	"time"
)

// closeAtExpiry closes c with 4401 when its credential expires (a signed token's exp, a
// client token's expiry), and returns what stops that when c ends first. y-websocket does
// not reconnect after a 44xx status by itself: the application hands the provider a fresh
// token and connects it again. A Hocuspocus document closes alone ("Unauthorized"); its
// provider sends a fresh token with sendToken.
func (s *Server) closeAtExpiry(c editor) (stop func()) {
	exp := c.credential().Expires
	if exp.IsZero() {
		return func() {}
	}
	t := s.opts.Clock.AfterFunc(exp.Sub(s.opts.Clock.Now()), func() {
		c.closeWith(statusTokenRevoked, "the token expired; reconnect with a fresh one", "token-expired")
	})
	return func() { t.Stop() }
}

// Editor describes one open editor connection, for the admin API and the dashboard: who (the
// credential's name and user — never the token), with what kind of credential, read-only or
// not, since when and until when its credential is valid.
type Editor struct {
	Name       string
	User       string
	Credential string // auth.CredentialClientToken, CredentialJWT, CredentialWebhook; empty without authentication
	ReadOnly   bool
	Remote     string
	Since      time.Time
	Expires    time.Time // zero: the credential does not expire
}

// EditorsOf lists the editors connected to namespace ns now, by name then start.
func (s *Server) EditorsOf(ns string) []Editor {
	s.mu.Lock()
	rm := s.rooms[ns]
	s.mu.Unlock()
	if rm == nil {
		return nil
	}
	var out []Editor
	for _, c := range rm.members() {
		out = append(out, c.describe())
	}
	slices.SortFunc(out, func(a, b Editor) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.Since.Compare(b.Since)
	})
	return out
}
