package registry

import (
	"errors"
	"reflect"

	"github.com/nomicore/nomicore/yjs"
)

// checkProtected is the protected-field check of §20 and GUIDE §4: an update that would
// change the `meta` root is ErrProtected, a malformed update ErrApplyFailed, an internal
// failure ErrInternal — and the live document is not written in any case.
func checkProtected(live *yjs.Doc, update []byte) error {
	return scratchCheck(live, update)
}

// scratchCheck is the literal §20 procedure: a scratch clone of the live state, the update
// applied to it, meta compared before and after.
func scratchCheck(live *yjs.Doc, update []byte) error {
	state, err := yjs.EncodeStateAsUpdate(live, nil)
	if err != nil {
		return ErrInternal.with("encoding the scratch clone", err)
	}
	scratch := yjs.NewDoc(yjs.WithClientID(0), yjs.WithGUID("scratch"))
	if err := yjs.ApplyUpdate(scratch, state, nil); err != nil {
		return ErrInternal.with("building the scratch clone", err)
	}
	before := metaJSON(scratch)
	if err := yjs.ApplyUpdate(scratch, update, nil); err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return ErrApplyFailed.with("", err)
		}
		return ErrInternal.with("scratch apply failed", err)
	}
	if !reflect.DeepEqual(before, metaJSON(scratch)) {
		return ErrProtected.with("", nil)
	}
	return nil
}

// metaJSON returns the meta root of doc as JSON values, without typing it: a meta root of
// another kind reads as whatever it holds.
func metaJSON(doc *yjs.Doc) any {
	return doc.ToJSON()[MetaRoot]
}
