package outbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serverTimeouts are the http.Server fields that bound a connection: a
// server without any of them lets slow or stalled clients hold connections
// open.
var serverTimeouts = []string{"ReadHeaderTimeout", "ReadTimeout", "WriteTimeout", "IdleTimeout"}

// Every HTTP server in the project, its examples and its documentation
// sets all four timeouts: each http.Server literal names them, and nothing
// calls http.ListenAndServe or http.Serve, whose servers have none.
func TestEveryHTTPServerSetsItsTimeouts(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var literals int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || path == "httpservers_test.go" {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, bare := range []string{"http.ListenAndServe(", "http.ListenAndServeTLS(", "http.Serve("} {
			if strings.Contains(string(src), bare) {
				t.Errorf("%s calls %s: its server has no timeouts; build an http.Server with them", path, bare)
			}
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || !isHTTPServer(lit.Type) {
				return true
			}
			literals++
			set := map[string]bool{}
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if id, ok := kv.Key.(*ast.Ident); ok {
						set[id.Name] = true
					}
				}
			}
			for _, field := range serverTimeouts {
				if !set[field] {
					t.Errorf("%s: an http.Server without %s", fset.Position(lit.Pos()), field)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if literals < 2 { // the admin endpoint's and the order service's
		t.Fatalf("found %d http.Server literals; the walk missed the project's servers", literals)
	}
}

func isHTTPServer(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "http" && sel.Sel.Name == "Server"
}
