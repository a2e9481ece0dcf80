package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nomicore/nomicore/persistence"
)

// A damaged store in `nmcr store check`: before rebuilding any document the check reads
// every record of the store and checks it (persistence.BoltStore.Verify: every page it
// reaches, every record's checksum, logs without gaps). Damage — a record that fails its
// checksum, a page bbolt cannot read, a file cut short — is reported first, one line per
// problem with where it is, then what to do; the documents that still load are checked as
// usual and those that do not are UNREADABLE. The exit status is then 1.

// verdictDamaged is the verdict of a damage line.
const verdictDamaged = "damaged"

// damageLine is one problem of a damaged store in the report of `nmcr store check --json`.
type damageLine struct {
	File    string `json:"file"`
	Where   string `json:"where"` // the record ("docs/<owner>/<ns>/log/17"), or "" for the file as a whole
	Reason  string `json:"reason"`
	Verdict string `json:"verdict"` // damaged
	Fix     string `json:"fix"`
}

// damageFix says what to do about a damaged store: a peer's is rebuilt from its hub, a
// hub's restored from a backup.
func damageFix(peer bool) string {
	if peer {
		return "a peer's store: start the peer with --rebuild-damaged-store; it moves the file aside (keep it: local writes " +
			"the hub did not have are only in it, nmcr store export FILE NAMESPACE prints them) and bootstraps every target " +
			"again from the hub"
	}
	return "a hub's store: restore the hub from a backup into a new directory (hub restore --from BACKUP --data NEWDIR) and " +
		"start it there; keep this file (nmcr store export reads what still loads). If this is a peer's store, start the " +
		"peer with --rebuild-damaged-store"
}

// reportDamage writes one line per problem of damage (a *persistence.CorruptError, or
// several joined).
func reportDamage(w io.Writer, path string, damage error, peer, asJSON bool) error {
	var problems []error
	if multi, ok := damage.(interface{ Unwrap() []error }); ok {
		problems = multi.Unwrap()
	} else {
		problems = []error{damage}
	}
	fix := damageFix(peer)
	enc := json.NewEncoder(w)
	for _, p := range problems {
		l := damageLine{File: path, Reason: strings.TrimPrefix(p.Error(), "persistence: "), Verdict: verdictDamaged, Fix: fix}
		var ce *persistence.CorruptError
		if errors.As(p, &ce) {
			l.File, l.Where, l.Reason = ce.Path, ce.Where, ce.Reason
		}
		var err error
		if asJSON {
			err = enc.Encode(l)
		} else {
			where := l.Where
			if where == "" {
				where = "the file as a whole"
			}
			_, err = fmt.Fprintf(w, "%s: DAMAGED at %s\n  %s\n", l.File, where, l.Reason)
		}
		if err != nil {
			return err
		}
	}
	if !asJSON {
		_, err := fmt.Fprintf(w, "The store file is damaged (%d problem(s) above). What to do — %s.\n", len(problems), fix)
		return err
	}
	return nil
}

// checkDamaged is the check of a store Verify found damaged: the damage, then every
// active namespace's document that still loads (and, with ns, only that one). The status
// is 1.
func checkDamaged(ctx context.Context, st *persistence.BoltStore, path, ns string, damage error, asJSON bool, w io.Writer) (int, error) {
	targets, _ := st.ConfigKeys(ctx, peerTargetPrefix)
	replica := map[string]bool{}
	for _, k := range targets {
		replica[strings.TrimPrefix(k, peerTargetPrefix)] = true
	}
	if err := reportDamage(w, st.Path(), damage, len(targets) > 0, asJSON); err != nil {
		return 1, err
	}
	entries, err := st.Entries(ctx, "")
	if err != nil {
		return 1, nil // the entries themselves are damaged: nothing more to check
	}
	enc := json.NewEncoder(w)
	for _, e := range entries {
		if e.State != persistence.StateActive || ns != "" && e.NamespaceID != ns {
			continue
		}
		doc, err := st.Load(ctx, e.Owner, e.NamespaceID)
		if err != nil {
			l := checkLine{NamespaceID: e.NamespaceID, Owner: e.Owner, Replica: replica[e.NamespaceID], Verdict: verdictBroken,
				Reason: "it does not load from the damaged store: " + strings.TrimPrefix(err.Error(), "persistence: ")}
			if asJSON {
				err = enc.Encode(l)
			} else {
				_, err = fmt.Fprintf(w, "%s, owner %s: %s\n  %s\n", l.NamespaceID, l.Owner, strings.ToUpper(l.Verdict), l.Reason)
			}
			if err != nil {
				return 1, err
			}
			continue
		}
		l := checkDoc(doc)
		l.NamespaceID, l.Owner, l.Replica = e.NamespaceID, e.Owner, replica[e.NamespaceID]
		verdict(&l)
		if asJSON {
			err = enc.Encode(l)
		} else {
			err = writeCheckLine(w, l)
		}
		if err != nil {
			return 1, err
		}
	}
	return 1, nil
}
