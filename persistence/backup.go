package persistence

import (
	"context"
	"io"

	bolt "go.etcd.io/bbolt"
)

// Backup copies the store file as one read transaction sees it: a consistent copy of a
// running store, the way bbolt offers it. open is called once, inside the transaction, with
// the size of the copy (the store file's size as of the transaction), and returns where to
// write it; Backup then writes exactly that many bytes there and returns them.
//
// Writers are not held up: a read transaction runs beside the committer. Two things change
// while it runs. The pages a commit frees meanwhile are reused only after it ends, so the
// file may grow by what is written during the copy. And a commit that must map a larger
// file (the store grew past the size bbolt mapped, which it doubles up to 1 GiB and then
// raises by 1 GiB) waits until the copy ends: that is the only pause a backup can cause.
//
// ctx ends the copy early (its error is returned and what was written is incomplete). A
// copy of a damaged store is as damaged as the store: check one before relying on it
// (Verify on the copy, which the restore does).
func (s *BoltStore) Backup(ctx context.Context, open func(size int64) (io.Writer, error)) (n int64, err error) {
	err = s.direct(ctx, false, func() error {
		return s.b.guard(false, func() error {
			return s.b.db.View(func(tx *bolt.Tx) error {
				w, err := open(tx.Size())
				if err != nil {
					return err
				}
				n, err = tx.WriteTo(ctxWriter{ctx, w})
				if err != nil && ctx.Err() != nil {
					return ctx.Err() // bbolt formats the writer's errors as text
				}
				return err
			})
		})
	})
	return n, err
}

// ctxWriter fails the writes to w once ctx ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
