package registry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/replication/protocol"
)

// declaredCodes returns every constant of type Code declared in the package's source
// (not its tests), by name, so that a code added later is checked without editing a list.
func declaredCodes(t *testing.T) map[string]Code {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	codes := map[string]Code{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: Code constant %s is not a string literal", fset.Position(n.Pos()), n.Name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes[n.Name] = Code(s)
				}
			}
		}
	}
	return codes
}

// The namespace layer converts a registry Code to the protocol's error code by value, so
// every Code must be a code of the protocol's namespace error registry.
func TestCodesAreProtocolNamespaceCodes(t *testing.T) {
	codes := declaredCodes(t)
	// the declared constants include the code of every error kind the registry returns
	for _, e := range []*Error{ErrNotFound, ErrProtected, ErrApplyFailed, ErrInternal, ErrDegraded,
		ErrBootstrapFailed, ErrIDMismatch, ErrEpochMismatch, ErrFenced, ErrRoleViolation, ErrClosed,
		ErrOverloaded, ErrInUse, ErrSchemaInvalid} {
		found := false
		for _, c := range codes {
			found = found || c == e.Code
		}
		if !found {
			t.Errorf("error %q has code %s, not one of the declared Code constants", e.Msg, e.Code)
		}
	}
	for name, c := range codes {
		if _, ok := protocol.LookupError(protocol.ScopeNamespace, protocol.ErrorCode(c)); !ok {
			t.Errorf("%s = %q is not in the protocol's namespace error registry", name, c)
		}
	}
}
