package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/nomicore/nomicore/persistence"
)

// storeHealth follows a local store's health (persistence.Options.OnHealthChange): it logs
// each change — what to do about a full disk in words — and keeps the current problem for
// /readyz.
type storeHealth struct {
	dir     string
	log     *slog.Logger
	problem atomic.Pointer[string] // nil while healthy
}

// changed is the store's OnHealthChange.
func (h *storeHealth) changed(healthy bool, err error) {
	if healthy {
		h.problem.Store(nil)
		h.log.Info("persistence healthy again: writes are taken again")
		return
	}
	msg := "the store cannot commit writes (" + OneLine(err) + "); it keeps trying"
	if errors.Is(err, persistence.ErrNoSpace) {
		free := "unknown"
		if n, ok := freeBytes(h.dir); ok {
			free = fmt.Sprintf("%d bytes", n)
		}
		msg = "the disk holding " + h.dir + " is full"
		h.log.Error("persistence degraded: the disk holding the data directory is full; writes are refused "+
			"(PERSISTENCE_DEGRADED) and reads go on. Free space on that filesystem — remove other files there, or "+
			"grow it: the store only grows (nomicore.db keeps the room it has and reuses it) — and the node takes "+
			"writes again by itself within seconds, nothing acknowledged lost",
			slog.String("data", h.dir), slog.String("file", filepath.Join(h.dir, persistence.FileName)),
			slog.String("free", free), slog.String("error", err.Error()))
	} else {
		h.log.Error("persistence degraded: writes are refused while the store fails to commit; it keeps retrying", slog.String("error", err.Error()))
	}
	h.problem.Store(&msg)
}

// Problem says why the store is not healthy ("" while it is).
func (h *storeHealth) Problem() string {
	if p := h.problem.Load(); p != nil {
		return *p
	}
	return ""
}
