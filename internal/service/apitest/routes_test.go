package apitest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// route is a pattern registered on the server's mux: its method ("" for
// every method) and its path in the document's spelling.
type route struct {
	method, path string
	at           string // where it is registered
}

// registeredRoutes reads the server's source for the patterns it
// registers on its mux: every call of a method named HandleFunc or Handle.
// A pattern that is not a string literal fails the test, so that no route
// can be registered out of its sight.
func registeredRoutes(t *testing.T) []route {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var routes []route
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") || len(c.Args) != 2 {
				return true
			}
			at := fset.Position(c.Pos()).String()
			lit, ok := c.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: a pattern that is not a string literal: the test cannot see which route it is", at)
				return true
			}
			pattern, _ := strconv.Unquote(lit.Value)
			method, path, found := strings.Cut(pattern, " ")
			if !found {
				method, path = "", pattern
			}
			if !strings.HasPrefix(path, "/") {
				t.Errorf("%s: pattern %q: the test reads only METHOD /path patterns", at, pattern)
				return true
			}
			// The mux's {name...} is the document's {name}: a client
			// sends the rest of the path in it, its slashes escaped.
			path = strings.ReplaceAll(path, "...}", "}")
			routes = append(routes, route{method: method, path: path, at: at})
			return true
		})
	}
	if len(routes) == 0 {
		t.Fatal("found no route in the server's source")
	}
	return routes
}

// TestRoutesDocumented: every route the server registers is in the
// document, and every operation in the document is a route the server
// registers.
func TestRoutesDocumented(t *testing.T) {
	sp := mustSpec(t)
	routes := registeredRoutes(t)
	for _, r := range routes {
		item := sp.doc.Paths.Value(r.path)
		switch {
		case item == nil:
			t.Errorf("%s: %s %s is served but not in the document", r.at, r.method, r.path)
		case r.method == "" && len(item.Operations()) == 0:
			t.Errorf("%s: %s has no operation in the document", r.at, r.path)
		case r.method != "" && item.GetOperation(r.method) == nil:
			t.Errorf("%s: %s %s is served but the document has no %s operation there", r.at, r.method, r.path, r.method)
		}
	}
	for _, path := range sp.doc.Paths.InMatchingOrder() {
		for method := range sp.doc.Paths.Value(path).Operations() {
			if !slices.ContainsFunc(routes, func(r route) bool {
				return r.path == path && (r.method == method || r.method == "" || (r.method == http.MethodGet && method == http.MethodHead))
			}) {
				t.Errorf("the document's %s %s is not a route the server registers", method, path)
			}
		}
	}
}
