package namespace_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/replication/protocol"
)

// TestS13_2_RegistryCodesAreNamespaceCodes: the namespace layer puts a registry error's Code
// on the wire as a namespace ERROR code (registry.CodeOf), so every registry.Code constant
// must be a code of the namespace registry (§13.2). The registry package does not import the
// protocol package and has no list of its codes, so the test reads them from its source:
// every constant declared with type Code.
func TestS13_2_RegistryCodesAreNamespaceCodes(t *testing.T) {
	files, err := filepath.Glob("../../registry/*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("registry constant %s is not a string literal", vs.Names[i].Name)
					}
					code, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					found++
					if _, ok := protocol.LookupError(protocol.ScopeNamespace, protocol.ErrorCode(code)); !ok {
						t.Errorf("registry.%s = %q is not a namespace error code of the protocol", vs.Names[i].Name, code)
					}
				}
			}
		}
	}
	if found < 9 {
		t.Fatalf("found %d registry codes in the registry's source, want at least the 9 it had", found)
	}
}
