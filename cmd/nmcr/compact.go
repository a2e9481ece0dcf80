package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
)

const compactAbout = `Deleting a namespace frees its pages in the store file at once (the next writes reuse them), ` +
	`but the file does not shrink. This copies the store without its free pages, checks that the copy holds ` +
	`exactly what the store holds, and either leaves it at --out FILE (the store is not changed; replace it ` +
	`yourself while the hub or peer is stopped) or, with --in-place --yes, puts it in the store's place (the ` +
	`store is locked throughout; the file is at every moment either the old store or the whole copy). ` +
	`Stop the hub or peer first: a running one holds its store locked. PATH is a store file or an instance's ` +
	`data directory (holding nomicore.db). Exit status: 0 done, 1 the store could not be compacted (nothing ` +
	`was changed), 2 bad usage.`

// runStoreCompact runs `nmcr store compact`.
func runStoreCompact(args []string, cio cli.IO) int {
	f := cli.NewFlags("nmcr store compact", "nmcr store compact PATH (--out FILE | --in-place --yes)", compactAbout)
	out := f.String("out", "", "write the compacted copy to `FILE`, which must not exist; the store is not changed")
	inPlace := f.Bool("in-place", false, "replace the store with its compacted copy (confirm with --yes)")
	yes := f.Bool("yes", false, "confirm --in-place")
	pos, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	switch {
	case len(pos) == 0:
		return f.Mistake(cio, "the store's PATH is required")
	case len(pos) > 1:
		return f.Mistake(cio, "unexpected argument %q", pos[1])
	case *out != "" && *inPlace:
		return f.Mistake(cio, "give either --out FILE or --in-place, not both")
	case *out == "" && !*inPlace:
		return f.Mistake(cio, "give --out FILE for a compacted copy, or --in-place --yes to replace the store with it")
	case *inPlace && !*yes:
		return f.Mistake(cio, "--in-place replaces %s with its compacted copy: stop the hub or peer, keep a backup, and confirm with --yes", pos[0])
	}
	src := pos[0]
	if fi, err := os.Stat(src); err == nil && fi.IsDir() {
		src = filepath.Join(src, persistence.FileName)
	}
	var res persistence.CompactResult
	var err error
	dst := *out
	if *inPlace {
		dst = src
		res, err = persistence.CompactInPlace(src)
	} else {
		res, err = persistence.CompactFile(src, dst)
	}
	if err != nil {
		if errors.Is(err, persistence.ErrLocked) {
			fmt.Fprintf(cio.Stderr, "nmcr store compact: %s is in use by a running hub or peer, which keeps it locked; stop it first (nothing was changed)\n", src)
		} else {
			fmt.Fprintf(cio.Stderr, "nmcr store compact: %v\n", err)
		}
		return 1
	}
	fmt.Fprintf(cio.Stdout, "compacted %s (%s) into %s (%s): %s given back\n", src, sizeText(res.Before), dst, sizeText(res.After),
		sizeText(max(0, res.Before-res.After)))
	return 0
}

// sizeText says a size in bytes in the unit that reads best.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
