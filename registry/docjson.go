package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nomicore/nomicore/yjs"
)

// Root names a root type and the kind to read it as (`--root NAME:TYPE`, by the JSON rules
// of docs/decisions.md#yjs).
type Root struct {
	Name string
	Kind yjs.Kind
}

// JSON returns the document as JSON values (yjs Doc.ToJSON), read in a slot. With roots,
// only those roots, each rendered as the kind given, from a copy of the document: typing a
// root is for good, and a reader must not retype the live document's roots for every later
// reader. A root that holds another kind — the one it has, or as Yjs infers it for a root
// no client typed — is ErrApplyFailed with a *RootKindError as cause; an empty root fits
// every kind, and a root the document lacks renders empty.
func (l *Lease) JSON(ctx context.Context, roots ...Root) (map[string]any, error) {
	if len(roots) == 0 {
		return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (map[string]any, error) {
			return rt.doc.ToJSON(), nil
		})
	}
	doc, err := l.copyDoc(ctx)
	if err != nil {
		return nil, err
	}
	return renderRoots(doc, roots)
}

// RootInfo describes a root of a document (Lease.Roots).
type RootInfo struct {
	Name string
	// Kind is the kind the root has, or as Yjs infers it for a root no client typed, as the
	// word a root declaration uses: map, array, text or xml.
	Kind string
	// JSON is the root rendered as that kind.
	JSON any
}

// Roots lists the roots of the document, by name, read from a copy of it like JSON with
// roots.
func (l *Lease) Roots(ctx context.Context) ([]RootInfo, error) {
	doc, err := l.copyDoc(ctx)
	if err != nil {
		return nil, err
	}
	out := []RootInfo{}
	for _, name := range doc.RootNames() {
		t, err := doc.Get(name, yjs.KindUnknown)
		if err != nil {
			return nil, ErrInternal.with("reading a root", err)
		}
		kind, _ := rootFits(t, yjs.KindUnknown)
		_, k, _ := yjs.ParseRootSpec("x:" + kind)
		out = append(out, RootInfo{Name: name, Kind: kind, JSON: renderAs(t, k)})
	}
	slices.SortFunc(out, func(x, y RootInfo) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// RootKindError reports a root asked for as a kind it does not hold (Lease.JSON).
type RootKindError struct {
	Name string // the root
	Has  string // the kind it holds (or as Yjs infers it): map, array, text or xml
	Want string // the kind asked for
}

func (e *RootKindError) Error() string {
	return fmt.Sprintf("root %q is a %s, not a %s", e.Name, e.Has, e.Want)
}

// Unwrap gives yjs.ErrKindMismatch, the error of typing a root as another kind.
func (e *RootKindError) Unwrap() error { return yjs.ErrKindMismatch }

// copyDoc returns a detached copy of the document: its whole state, encoded in a slot (and
// shared with other readers of the same unchanged document), applied to a new document
// outside the sequencer.
func (l *Lease) copyDoc(ctx context.Context) (*yjs.Doc, error) {
	state, err := l.EncodeState(ctx, nil)
	if err != nil {
		return nil, err
	}
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return nil, ErrInternal.with("the document's state does not decode", err)
	}
	return doc, nil
}

// renderRoots renders the declared roots of a detached document, typing them as declared.
func renderRoots(doc *yjs.Doc, roots []Root) (map[string]any, error) {
	present := map[string]bool{}
	for _, name := range doc.RootNames() {
		present[name] = true
	}
	out := make(map[string]any, len(roots))
	for _, root := range roots {
		if present[root.Name] {
			t, err := doc.Get(root.Name, yjs.KindUnknown)
			if err != nil {
				return nil, ErrInternal.with("reading a root", err)
			}
			if actual, fits := rootFits(t, root.Kind); !fits {
				e := &RootKindError{Name: root.Name, Has: actual, Want: kindName(root.Kind)}
				return nil, ErrApplyFailed.with(e.Error(), e)
			}
		}
		t, err := doc.Get(root.Name, root.Kind) // the check above leaves no other kind
		if err != nil {
			return nil, ErrApplyFailed.with("root "+root.Name+" has another type", err)
		}
		out[root.Name] = renderAs(t, root.Kind)
	}
	return out, nil
}

// rootFits reports whether a root of the document can be read as kind, and what it holds
// (the kind it has, or as Yjs infers it for a root no client typed: keyed entries a map,
// text content a text, anything else an array). An empty root fits every kind; XML
// fragments hold types, which the inference calls an array.
func rootFits(t *yjs.Type, kind yjs.Kind) (actual string, fits bool) {
	if t.Kind() != yjs.KindUnknown {
		return kindName(t.Kind()), t.Kind() == kind
	}
	switch v := (*yjs.Map)(t).ToJSON().(type) { // an untyped root renders as its inferred kind
	case map[string]any:
		return "map", len(v) == 0 || kind == yjs.KindMap
	case string:
		return "text", v == "" || kind == yjs.KindText
	case []any:
		return "array", len(v) == 0 || kind == yjs.KindArray || kind == yjs.KindXmlFragment
	}
	return "array", true
}

// renderAs renders a typed root.
func renderAs(t *yjs.Type, kind yjs.Kind) any {
	switch kind {
	case yjs.KindMap:
		return (*yjs.Map)(t).ToJSON()
	case yjs.KindText:
		return (*yjs.Text)(t).ToJSON()
	case yjs.KindXmlFragment:
		return (*yjs.XmlFragment)(t).ToJSON()
	}
	return (*yjs.Array)(t).ToJSON()
}

// kindName is the word a root declaration uses for a kind.
func kindName(k yjs.Kind) string {
	switch k {
	case yjs.KindMap:
		return "map"
	case yjs.KindArray:
		return "array"
	case yjs.KindText:
		return "text"
	case yjs.KindXmlFragment:
		return "xml"
	}
	return k.String()
}
