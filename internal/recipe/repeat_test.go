package recipe

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
)

// A recipe's samples per row default to experiment's (Options.repeat) or
// to a named constant of the recipe (Options.repeatOr): no recipe types
// the number at the call or in a spec's Repeat field. The source is read,
// so a 3 typed again is caught though it equals today's default.
func TestRepeatDefaultsNotTyped(t *testing.T) {
	if got := (Options{}).repeat(); got != experiment.DefaultRepeat {
		t.Errorf("Options{}.repeat() = %d, want experiment.DefaultRepeat %d", got, experiment.DefaultRepeat)
	}
	if got := (Options{Repeat: 7}).repeat(); got != 7 {
		t.Errorf("Options{Repeat: 7}.repeat() = %d, want the user's 7", got)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "repeat" && sel.Sel.Name != "repeatOr") {
					return true
				}
				calls++
				for _, a := range x.Args {
					if l, ok := a.(*ast.BasicLit); ok {
						t.Errorf("%s: %s(%s): name the recipe's default, or take experiment's with repeat()", fset.Position(l.Pos()), sel.Sel.Name, l.Value)
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Repeat" {
					if l, ok := x.Value.(*ast.BasicLit); ok {
						t.Errorf("%s: Repeat: %s typed in a spec: take Options.repeat()", fset.Position(l.Pos()), l.Value)
					}
				}
			}
			return true
		})
	}
	if calls < 8 {
		t.Fatalf("only %d calls of Options.repeat found: the check is broken", calls)
	}
}
