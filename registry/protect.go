package registry

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nomicore/nomicore/yjs"
)

// checkProtected is the protected-field check (docs/protocol.md#protected-apply), run in the
// slot before the live apply: an update that touches the `meta` root is ErrProtected, a
// malformed update ErrApplyFailed, an internal failure ErrInternal — and the live document
// is not written in any case.
//
// "Touches" is decided read-only by yjs.InspectUpdate, at a cost proportional to the update
// (plus the small live content of meta), never to the document: the update is refused when
// any struct of it would be integrated under meta — a changed value, a new key, a nested
// type, but also an equal-value rewrite or a concurrent value that would lose — or when a
// delete range hits live content under meta. This refuses every update that would change a
// meta value (the verdict of "apply to a scratch clone and compare meta"), and a few that
// would not; equal-value rewrites are refused.
//
// A struct whose dependencies are missing waits as pending and is placed, when released,
// where the missing struct is. Only the registry writes meta, through the live document's own
// client, so the update is also refused when it waits for a struct of that client: such a
// struct could otherwise slip into meta with the registry's next write. Structs waiting for
// any other client can only land under meta if the struct they wait for does, and that
// struct is refused when it comes. On a peer, meta is written by the hub's registry client,
// which the peer cannot name: a local write waiting for that client's next meta write is not
// refused here (the hub refuses it when it arrives there).
func checkProtected(live *yjs.Doc, update []byte) error {
	p, err := parseUpdate(update)
	if err != nil {
		return err
	}
	return checkProtectedParsed(live, p)
}

// checkProtectedParsed is checkProtected of an update parsed already (parseUpdate), which the
// live apply then uses without decoding it again.
func checkProtectedParsed(live *yjs.Doc, p *yjs.ParsedUpdate) error {
	eff, err := inspectParsed(live, p)
	if err != nil {
		return err
	}
	switch {
	case eff.Inserts:
		return ErrProtected.with("update writes under meta", nil)
	case eff.Deletes:
		return ErrProtected.with("update deletes under meta", nil)
	case slices.Contains(eff.Waiting, live.ClientID()):
		return ErrProtected.with("update waits for the registry's own meta writes", nil)
	}
	return nil
}

// touchesMetaParsed reports whether a parsed update (parseUpdate) would integrate or delete
// anything under the `meta` root (a peer applying its hub's update: meta.schema may change and
// must be re-armed).
func touchesMetaParsed(live *yjs.Doc, p *yjs.ParsedUpdate) (bool, error) {
	eff, err := inspectParsed(live, p)
	return eff.Inserts || eff.Deletes, err
}

// parseUpdate decodes update once for the inspection and the apply (yjs.ParseUpdate): a
// malformed update is ErrApplyFailed, any other failure (a panic included) ErrInternal.
func parseUpdate(update []byte) (p *yjs.ParsedUpdate, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, ErrInternal.with("update decoding failed", fmt.Errorf("%v", r))
		}
	}()
	p, err = yjs.ParseUpdate(update)
	if err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return nil, ErrApplyFailed.with("", err)
		}
		return nil, ErrInternal.with("update decoding failed", err)
	}
	return p, nil
}

// inspectParsed is yjs.InspectParsed on the `meta` root, at a cost proportional to the
// update: any failure (a panic) is ErrInternal.
func inspectParsed(live *yjs.Doc, p *yjs.ParsedUpdate) (eff yjs.RootEffect, err error) {
	defer func() {
		if r := recover(); r != nil {
			eff, err = yjs.RootEffect{}, ErrInternal.with("meta inspection failed", fmt.Errorf("%v", r))
		}
	}()
	return yjs.InspectParsed(live, p, MetaRoot), nil
}
