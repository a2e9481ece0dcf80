package node

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
)

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// HubBackup returns the backup of a single hub for the admin API (GET /v1/backup): its
// store file as one read transaction sees it (persistence.BoltStore.Backup: writes go on
// meanwhile) and its tokens file, in package backup's format.
func HubBackup(st *persistence.BoltStore, tokensFile, instanceID string, clk clock.Clock) func(context.Context, io.Writer) (int64, error) {
	return func(ctx context.Context, w io.Writer) (int64, error) {
		cw := &countingWriter{w: w}
		bw, err := backup.NewWriter(cw, backup.Header{Kind: backup.KindHub, CreatedAt: clk.Now().UTC(),
			Version: cli.Version("hub"), InstanceID: instanceID, StoreFormat: persistence.FormatVersion})
		if err != nil {
			return cw.n, err
		}
		if _, err := st.Backup(ctx, func(size int64) (io.Writer, error) { return bw.Section(backup.KindStore, size) }); err != nil {
			return cw.n, err
		}
		// The tokens file as it is now (edits are atomic renames: one version or the other).
		tokens, err := os.ReadFile(tokensFile)
		switch {
		case err == nil:
			if err := bw.Bytes(backup.KindTokens, tokens); err != nil {
				return cw.n, err
			}
		case !errors.Is(err, os.ErrNotExist):
			return cw.n, err
		}
		return cw.n, bw.Close()
	}
}
