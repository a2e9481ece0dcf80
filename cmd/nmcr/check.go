package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// `nmcr store check`: rebuilds each stored document with this version's Yjs core, replays
// the same stored updates the way older versions applied them, and says whether an older
// hub or peer may have served or stored a damaged document.
//
// Before this version, applying an update whose deletions ended inside a struct could delete
// live content of a document in which one client owned more than 512 structs (one chunk of
// the core's struct lists). What such a damaged running document wrote down — a snapshot
// taken from it; on a peer, every update the hub relayed — carries those deletions as if
// someone had made them. The updates a hub logs are kept as they were received, so what is
// rebuilt only from them is right.

const checkAbout = `First reads every record of the store and checks it (its checksum, the pages that hold it, ` +
	`logs without gaps): damage — a record that fails its checksum, a page that cannot be read, a file cut short — is ` +
	`reported as DAMAGED, where it is, and what to do (a peer: --rebuild-damaged-store; a hub: restore a backup). Then it ` +
	`rebuilds each stored document (or NAMESPACE's, and its archives) with this version: ` +
	`the snapshot, then each logged update in order, as a hub or peer loads it, and all of them merged, as ` +
	`compaction folds them; the two must agree. It replays the same updates as versions before this one ` +
	`applied them: those could delete live text and map entries of a document in which one client owned more ` +
	`than 512 structs, and what a damaged running document wrote down (a snapshot taken from it, and on a peer ` +
	`every update the hub relayed) carries those deletions. Verdicts: OK (nothing to do), SERVED-DAMAGED (the ` +
	`store holds every update the namespace received and this version rebuilds it right, but an older version ` +
	`applying them lost content: what it served to editors and peers lacked it), UNVERIFIED (large, and its ` +
	`snapshot stands for updates the store no longer holds and may have been written from a damaged document), ` +
	`RESET (a large peer replica: it holds what the hub sent; reset it once the hub is right), UNREADABLE, ` +
	`INCONSISTENT. docs/operations.md says what to do.`

// exposedStructs is the fragmentation above which a document may have been hit: the fault
// needed more than 512 structs in one client's list; half that leaves room for documents
// whose lists were longer before their deleted parts were merged.
const exposedStructs = 256

// peerTargetPrefix is where a peer keeps its replication targets in the store's
// configuration (package node): a namespace with a target there is a peer's replica.
const peerTargetPrefix = "peer/targets/"

// Verdicts of `nmcr store check`.
const (
	verdictOK         = "ok"             // nothing to do
	verdictServed     = "served-damaged" // the store is right, an older version serving it was not
	verdictUnverified = "unverified"     // large, and its snapshot stands for updates no longer stored
	verdictReplica    = "reset"          // large peer replica: it holds what the hub sent
	verdictBroken     = "unreadable"     // it does not load
	verdictDiffers    = "inconsistent"   // two ways of loading it disagree
)

// checkLine is one document in the report of `nmcr store check --json`.
type checkLine struct {
	NamespaceID     string `json:"namespaceId"`
	Owner           string `json:"owner"`
	Archive         uint64 `json:"archive,omitempty"`
	Replica         bool   `json:"peerReplica"` // the namespace is a replication target of this (peer) store
	SnapshotBytes   int    `json:"snapshotBytes"`
	SnapshotThrough uint64 `json:"snapshotThrough"`
	LogUpdates      int    `json:"logUpdates"`
	MaxStructs      int    `json:"maxClientStructs"` // the most structs one client owns
	// Roots sizes each root as this version rebuilds it (text: characters, map: keys, array:
	// items); OlderRoots the same as an older version rebuilt it, when that differs.
	Roots      map[string]int `json:"roots,omitempty"`
	OlderRoots map[string]int `json:"olderRoots,omitempty"`
	OlderError string         `json:"olderError,omitempty"` // an older version failed to load it
	Verdict    string         `json:"verdict"`
	Reason     string         `json:"reason"`
}

// storeCheck checks every document of the store (or the one of ns), and with archives the
// archived ones too, writing the report to w. It returns the exit status: 0 when every
// document is ok, 3 when one needs attention (served-damaged, unverified or reset), 1 when
// one does not load or loads two ways that disagree.
func storeCheck(ctx context.Context, st *persistence.BoltStore, path, ns string, archives, asJSON bool, w io.Writer) (int, error) {
	docs, err := st.Docs(ctx)
	if err != nil {
		return 1, err
	}
	targets, err := st.ConfigKeys(ctx, peerTargetPrefix)
	if err != nil {
		return 1, err
	}
	replica := map[string]bool{}
	for _, k := range targets {
		replica[strings.TrimPrefix(k, peerTargetPrefix)] = true
	}
	type job struct {
		ns, owner string
		archive   uint64
		load      func() (persistence.Doc, error)
	}
	var jobs []job
	for _, d := range docs {
		if ns != "" && d.NamespaceID != ns {
			continue
		}
		d := d
		jobs = append(jobs, job{ns: d.NamespaceID, owner: d.Owner, load: func() (persistence.Doc, error) { return st.Load(ctx, d.Owner, d.NamespaceID) }})
	}
	if archives || ns != "" {
		as, err := st.Archives(ctx, ns)
		if err != nil {
			return 1, err
		}
		for _, a := range as {
			if !a.HasDoc || (!archives && a.NamespaceID != ns) {
				continue
			}
			a := a
			jobs = append(jobs, job{ns: a.NamespaceID, owner: a.Entry.Owner, archive: a.ID, load: func() (persistence.Doc, error) { return st.LoadArchive(ctx, a.NamespaceID, a.ID) }})
		}
	}
	if ns != "" && len(jobs) == 0 {
		return 1, fmt.Errorf("no document %s (nmcr store ls %s lists what the store holds)", ns, cli.ShellArg(path))
	}
	status := 0
	enc := json.NewEncoder(w)
	for _, j := range jobs {
		doc, err := j.load()
		if err != nil {
			return 1, fmt.Errorf("%s: %w", j.ns, err)
		}
		l := checkDoc(doc)
		l.NamespaceID, l.Owner, l.Archive, l.Replica = j.ns, j.owner, j.archive, replica[j.ns]
		verdict(&l)
		switch {
		case l.Verdict == verdictBroken || l.Verdict == verdictDiffers:
			status = 1
		case l.Verdict != verdictOK && status == 0:
			status = 3
		}
		if asJSON {
			err = enc.Encode(l)
		} else {
			err = writeCheckLine(w, l)
		}
		if err != nil {
			return 1, err
		}
	}
	return status, nil
}

// checkDoc loads a stored document the way a hub or peer does (the snapshot, then each
// logged update in order) and the way compaction folds it (all merged, applied at once) and
// compares the two: their JSON and state vectors must agree. It also replays the stored
// updates as older versions applied them (yjs.ReplayAsOlderVersions). The verdict is left
// to verdict.
func checkDoc(doc persistence.Doc) checkLine {
	l := checkLine{SnapshotBytes: len(doc.Snapshot), SnapshotThrough: doc.SnapshotThrough, LogUpdates: len(doc.Updates)}
	var all [][]byte
	if len(doc.Snapshot) > 0 {
		all = append(all, doc.Snapshot)
	}
	all = append(all, doc.Updates...)
	loaded := yjs.NewDoc()
	for i, u := range all {
		if err := yjs.ApplyUpdate(loaded, u, nil); err != nil {
			l.Verdict, l.Reason = verdictBroken, fmt.Sprintf("%s does not apply: %v", storedName(i, len(doc.Snapshot) > 0), err)
			return l
		}
	}
	for _, n := range loaded.StructCounts() {
		l.MaxStructs = max(l.MaxStructs, n)
	}
	view, err := json.Marshal(loaded.ToJSON())
	if err != nil {
		l.Verdict, l.Reason = verdictBroken, fmt.Sprintf("the document does not render as JSON: %v", err)
		return l
	}
	l.Roots = rootSizes(loaded.ToJSON())
	if len(all) > 1 {
		merged, err := yjs.MergeUpdates(all)
		if err != nil {
			l.Verdict, l.Reason = verdictBroken, fmt.Sprintf("the stored updates do not merge: %v", err)
			return l
		}
		folded := yjs.NewDoc()
		if err := yjs.ApplyUpdate(folded, merged, nil); err != nil {
			l.Verdict, l.Reason = verdictBroken, fmt.Sprintf("the stored updates, merged, do not apply: %v", err)
			return l
		}
		foldedView, err := json.Marshal(folded.ToJSON())
		if err != nil || !bytes.Equal(view, foldedView) || !bytes.Equal(loaded.EncodeStateVector(), folded.EncodeStateVector()) {
			l.Verdict = verdictDiffers
			l.Reason = "applying the snapshot and the logged updates one by one and applying them merged give different " +
				"documents: this version of the Yjs core is at fault; keep this store and report it"
			return l
		}
	}
	older, err := yjs.ReplayAsOlderVersions(all)
	if err != nil {
		l.OlderError = err.Error()
		return l
	}
	olderView, err := json.Marshal(older.ToJSON())
	if err != nil {
		l.OlderError = err.Error()
	} else if !bytes.Equal(view, olderView) {
		l.OlderRoots = rootSizes(older.ToJSON())
	}
	return l
}

// verdict says what l means for the operator, unless checkDoc found it broken.
func verdict(l *checkLine) {
	if l.Verdict != "" {
		return
	}
	olderLost := l.OlderRoots != nil || l.OlderError != ""
	large := l.MaxStructs > exposedStructs || olderLost
	switch {
	case !large:
		l.Verdict = verdictOK
		l.Reason = fmt.Sprintf("no client owns more than %d structs: too small for the fault of older versions", exposedStructs)
	case l.Replica:
		l.Verdict = verdictReplica
		l.Reason = "a peer's replica holds what the hub sent, and a hub of an older version may have sent deletions nobody " +
			"made: once the hub's copy is right, reset this replica (POST /v1/namespaces/{id}/reset on this peer)"
		if olderLost {
			l.Reason = "an older version applying these stored updates lost content (above); " + l.Reason
		}
	case l.SnapshotThrough == 0 && olderLost:
		l.Verdict = verdictServed
		l.Reason = "the store holds every update the namespace received and this version rebuilds it right, but an older " +
			"version applying them lost content (above): what it served to editors and peers lacked it, and they may " +
			"send those deletions back"
	case l.SnapshotThrough == 0:
		l.Verdict = verdictOK
		l.Reason = "rebuilt from every update the namespace received, as received; an older version applying them lost nothing"
	default:
		l.Verdict = verdictUnverified
		l.Reason = fmt.Sprintf("the snapshot stands for updates 1 to %d, which the store no longer holds, and an older version "+
			"may have written it from a damaged document: compare it with a backup from before that version applied large updates", l.SnapshotThrough)
		if olderLost {
			l.Reason = "an older version loading this store lost content (above); and " + l.Reason
		}
	}
}

// storedName names the i-th stored update (the snapshot first when there is one).
func storedName(i int, snapshot bool) string {
	switch {
	case snapshot && i == 0:
		return "the snapshot"
	case snapshot:
		return fmt.Sprintf("logged update %d", i)
	}
	return fmt.Sprintf("logged update %d", i+1)
}

// rootSizes sizes each root of a document's JSON view: a text's characters, a map's keys, an
// array's items.
func rootSizes(view map[string]any) map[string]int {
	out := make(map[string]int, len(view))
	for name, v := range view {
		switch x := v.(type) {
		case string:
			out[name] = utf8.RuneCountInString(x)
		case map[string]any:
			out[name] = len(x)
		case []any:
			out[name] = len(x)
		}
	}
	return out
}

// writeCheckLine writes one document of the report for people.
func writeCheckLine(w io.Writer, l checkLine) error {
	var b strings.Builder
	b.WriteString(l.NamespaceID)
	if l.Archive > 0 {
		fmt.Fprintf(&b, " (archive %d)", l.Archive)
	}
	fmt.Fprintf(&b, ", owner %s", l.Owner)
	if l.Replica {
		b.WriteString(", peer replica")
	}
	fmt.Fprintf(&b, ": %s\n", strings.ToUpper(l.Verdict))
	switch {
	case l.SnapshotBytes == 0:
		b.WriteString("  no snapshot")
	case l.SnapshotThrough == 0:
		fmt.Fprintf(&b, "  the snapshot it was created with (%d bytes)", l.SnapshotBytes)
	default:
		fmt.Fprintf(&b, "  a snapshot of %d bytes for updates 1 to %d", l.SnapshotBytes, l.SnapshotThrough)
	}
	if l.LogUpdates == 1 {
		b.WriteString(", 1 logged update")
	} else {
		fmt.Fprintf(&b, ", %d logged updates", l.LogUpdates)
	}
	if l.Roots != nil {
		fmt.Fprintf(&b, "; the largest client owns %d structs", l.MaxStructs)
	}
	b.WriteString("\n")
	names := make([]string, 0, len(l.Roots))
	for n := range l.Roots {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %d", n, l.Roots[n])
		if o, ok := l.OlderRoots[n]; ok && o != l.Roots[n] {
			fmt.Fprintf(&b, " (an older version: %d)", o)
		}
		b.WriteString("\n")
	}
	if l.OlderRoots != nil && maps.Equal(l.OlderRoots, l.Roots) {
		b.WriteString("  an older version rebuilt other content of the same sizes\n")
	}
	if l.OlderError != "" {
		fmt.Fprintf(&b, "  an older version fails to load it: %s\n", l.OlderError)
	}
	fmt.Fprintf(&b, "  %s\n", l.Reason)
	_, err := io.WriteString(w, b.String())
	return err
}
