package adminapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// backup is GET /v1/backup (hub): a consistent copy of the hub's state while it keeps
// serving, streamed as it is taken (package backup's format; `hub backup` saves and checks
// it). It is served only by an API that requires the admin token — a backup holds every
// namespace of every owner — and is audited ("backup-taken"). A copy that fails midway ends
// the response early: the file then lacks its checksum, and `hub backup` and `hub restore`
// refuse it.
func (a *API) backup(w http.ResponseWriter, r *http.Request) {
	if a.opts.Backup == nil {
		writeError(w, &Error{http.StatusNotFound, CodeNotFound, "this hub does not take backups"})
		return
	}
	if a.opts.Token == "" {
		writeError(w, &Error{http.StatusForbidden, CodeTokenRequired, "a backup holds every namespace, so the hub serves it only " +
			"when its admin API requires a token: start the hub with --admin-token-file FILE (or NOMICORE_ADMIN_TOKEN), " +
			"then hub backup --admin-token-file FILE"})
		return
	}
	start := a.opts.Clock.Now()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="nomicore-%s.backup"`, start.UTC().Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	n, err := a.opts.Backup(r.Context(), w)
	took := a.opts.Clock.Now().Sub(start)
	if err != nil {
		a.log.Error("a backup failed; the response was cut short, which the backup's reader refuses",
			slog.Int64("bytes", n), slog.Duration("after", took), slog.String("remote", r.RemoteAddr), errAttr(err))
		if n == 0 {
			writeError(w, a.fromErr(err))
			return
		}
		panic(http.ErrAbortHandler) // the status is sent: end the response without its end
	}
	a.audit(r, "backup-taken", slog.Int64("bytes", n), slog.Float64("durationMs", float64(took.Microseconds())/1000),
		slog.Time("at", start.UTC().Truncate(time.Millisecond)))
}
