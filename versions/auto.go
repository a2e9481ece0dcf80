package versions

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// autoCursorKey is the configuration key of the automatic versions' cursor: every change
// after it that may still need a version is read again after a restart.
const autoCursorKey = "versions/auto-cursor"

// autoState is the scheduler's: what it counted, for metrics. The rest is owned by Run.
type autoState struct {
	mu      sync.Mutex // guards the counters
	taken   uint64
	failed  uint64
	pending int
}

// AutoStats counts the automatic versions.
type AutoStats struct {
	Taken, Failed uint64
	Pending       int // namespaces written since their last version, waiting for theirs
}

// AutoStats returns the counts of the automatic versions.
func (s *Service) AutoStats() AutoStats {
	s.auto.mu.Lock()
	defer s.auto.mu.Unlock()
	return AutoStats{Taken: s.auto.taken, Failed: s.auto.failed, Pending: s.auto.pending}
}

// activity is a namespace written since its last version: its first and last change.
type activity struct {
	owner string
	// seq is the number of the first change among those the reader gave; before is the
	// cursor just before it (the previous change's, or the one the reader opened after).
	seq         uint64
	before      changefeed.Cursor
	first, last time.Time
}

// Run takes the automatic versions until ctx ends (nothing when Options.AutoEvery is 0).
func (s *Service) Run(ctx context.Context) {
	if s.opts.AutoEvery <= 0 || s.opts.Feed == nil {
		return
	}
	for ctx.Err() == nil {
		if s.opts.Leader != nil && !s.opts.Leader() {
			if !s.sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if err := s.follow(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("automatic versions: reading the change feed failed; trying again", slog.String("error", err.Error()))
			if !s.sleep(ctx, 5*time.Second) {
				return
			}
		}
	}
}

func (s *Service) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := s.opts.Clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		return false
	}
}

// follow reads the feed from the saved cursor and takes the versions that fall due, until
// an error, ctx ends, or the node stops leading.
func (s *Service) follow(ctx context.Context) error {
	feed := s.opts.Feed
	cursor, err := s.savedCursor(ctx)
	if err != nil {
		return err
	}
	r, err := feed.Open(ctx, cursor)
	if errors.Is(err, changefeed.ErrExpired) {
		s.log.Warn("automatic versions: the change feed no longer holds the changes after the saved cursor; namespaces written before are versioned with their next write")
		if cursor, err = feed.Head(ctx); err == nil {
			r, err = feed.Open(ctx, cursor)
		}
	}
	if err != nil {
		return err
	}
	defer r.Close()
	pending := map[string]*activity{}
	saved := cursor
	pos := cursor
	var seq uint64 // the changes read
	for {
		if s.opts.Leader != nil && !s.opts.Leader() {
			return nil
		}
		wake := r.Wake()
		events, err := r.Next(ctx, 1000)
		if err != nil {
			return err
		}
		for _, e := range events {
			before := pos
			pos = e.Cursor
			seq++
			switch e.Kind {
			case persistence.ChangeUpdated, persistence.ChangeRestored:
				a := pending[e.NamespaceID]
				if a == nil {
					a = &activity{owner: e.Owner, seq: seq, before: before, first: e.At}
					pending[e.NamespaceID] = a
				}
				a.last = e.At
			case persistence.ChangeDeleted:
				delete(pending, e.NamespaceID)
			}
		}
		s.takeDue(ctx, pending)
		// The cursor to read again from after a restart: before the oldest change still
		// waiting for its version (cursors are opaque: the oldest is the one read first).
		next, oldest := pos, seq+1
		for _, a := range pending {
			if a.seq < oldest {
				next, oldest = a.before, a.seq
			}
		}
		if next != saved {
			if err := s.opts.Config.PutConfig(ctx, autoCursorKey, []byte(next)); err == nil {
				saved = next
			}
		}
		s.auto.mu.Lock()
		s.auto.pending = len(pending)
		s.auto.mu.Unlock()
		if len(events) == 1000 {
			continue
		}
		tick := make(chan struct{})
		t := s.opts.Clock.AfterFunc(time.Second, func() { close(tick) })
		select {
		case <-wake:
		case <-tick:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		t.Stop()
	}
}

// takeDue takes the versions of the namespaces written AutoEvery ago or longer.
func (s *Service) takeDue(ctx context.Context, pending map[string]*activity) {
	now := s.opts.Clock.Now()
	for ns, a := range pending {
		if now.Sub(a.first) < s.opts.AutoEvery {
			continue
		}
		// A version taken since the first write counts as this one.
		if newest, ok := s.newestVersion(ctx, ns); ok && !newest.Before(a.first) {
			if !newest.Before(a.last) {
				delete(pending, ns)
			} else {
				a.first = newest
			}
			continue
		}
		_, err := s.Take(ctx, a.owner, ns, "automatic", persistence.VersionAuto)
		s.auto.mu.Lock()
		if err == nil {
			s.auto.taken++
		} else {
			s.auto.failed++
		}
		s.auto.mu.Unlock()
		switch {
		case err == nil, errors.Is(err, registry.ErrNotFound):
			delete(pending, ns)
		case ctx.Err() != nil:
			return
		default:
			s.log.Warn("an automatic version failed; it is tried again in a second",
				slog.String("namespaceId", ns), slog.String("error", err.Error()))
		}
	}
}

func (s *Service) newestVersion(ctx context.Context, ns string) (time.Time, bool) {
	list, err := s.opts.Store.Versions(ctx, ns)
	if err != nil || len(list) == 0 {
		return time.Time{}, false
	}
	return list[len(list)-1].CreatedAt, true
}

// savedCursor reads the scheduler's cursor (the feed's head when it has none yet).
// A cursor saved by an earlier version reads as the feed reads it (on a hub cluster, a
// plain number is a position in NOMICORE_LOG: changefeed.Source.ParseCursor).
func (s *Service) savedCursor(ctx context.Context) (changefeed.Cursor, error) {
	b, err := s.opts.Config.Config(ctx, autoCursorKey)
	if errors.Is(err, persistence.ErrNotFound) {
		// The first start: from now on.
		head, err := s.opts.Feed.Head(ctx)
		if err != nil {
			return "", err
		}
		return head, s.opts.Config.PutConfig(ctx, autoCursorKey, []byte(head))
	}
	if err != nil {
		return "", err
	}
	c, err := s.opts.Feed.ParseCursor(string(b))
	if err != nil {
		return s.opts.Feed.Head(ctx)
	}
	return c, nil
}
