package yjs

import (
	"fmt"
	"strings"
)

// ParseRootSpec parses a root declaration NAME:TYPE (`nmcr doc json --root`, the admin
// API's ?root=; docs/decisions.md#yjs), TYPE being map, array, text or xml. The name may
// itself contain ':'.
func ParseRootSpec(decl string) (name string, kind Kind, err error) {
	i := strings.LastIndexByte(decl, ':')
	if i <= 0 {
		return "", KindUnknown, fmt.Errorf("root %q: want NAME:map|array|text|xml", decl)
	}
	name, typ := decl[:i], decl[i+1:]
	switch typ {
	case "map":
		return name, KindMap, nil
	case "array":
		return name, KindArray, nil
	case "text":
		return name, KindText, nil
	case "xml":
		return name, KindXmlFragment, nil
	}
	return "", KindUnknown, fmt.Errorf("root %q: unknown type %q (want map, array, text or xml)", decl, typ)
}
