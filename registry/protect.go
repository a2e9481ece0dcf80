package registry

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nomicore/nomicore/yjs"
)

// checkProtected is the protected-field check of §20 and GUIDE §4, run in the slot before the
// live apply: an update that touches the `meta` root is ErrProtected, a malformed update
// ErrApplyFailed, an internal failure ErrInternal — and the live document is not written in
// any case.
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
	eff, err := inspectMeta(live, update)
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

// touchesMeta reports whether update would integrate or delete anything under the `meta`
// root (a peer applying its hub's update: meta.schema may change and must be re-armed).
func touchesMeta(live *yjs.Doc, update []byte) (bool, error) {
	eff, err := inspectMeta(live, update)
	return eff.Inserts || eff.Deletes, err
}

// inspectMeta is yjs.InspectUpdate of update on the `meta` root, at a cost proportional to
// the update: a malformed update is ErrApplyFailed, any other failure (a panic included)
// ErrInternal.
func inspectMeta(live *yjs.Doc, update []byte) (eff yjs.RootEffect, err error) {
	defer func() {
		if p := recover(); p != nil {
			eff, err = yjs.RootEffect{}, ErrInternal.with("meta inspection failed", fmt.Errorf("%v", p))
		}
	}()
	eff, err = yjs.InspectUpdate(live, update, MetaRoot)
	if err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return yjs.RootEffect{}, ErrApplyFailed.with("", err)
		}
		return yjs.RootEffect{}, ErrInternal.with("meta inspection failed", err)
	}
	return eff, nil
}
