package verdict

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Medians and spreads are taken here and nowhere else: no other package
// declares a median, a percentile or a summary of samples, or picks the
// middle of a sorted slice (s[len(s)/2]) itself. Two copies of the
// statistics drift apart (one rounds, the other interpolates), and then a
// document and a verdict disagree about the same samples.
func TestStatisticsLiveOnlyHere(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && p != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if filepath.Dir(rel) == filepath.Join("internal", "verdict") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		seen++
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && statsName[d.Name.Name] {
					t.Errorf("%s declares %s: medians and spreads are verdict.Median and verdict.Of", rel, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Spread" {
						t.Errorf("%s declares type %s: the summary of samples is verdict.Spread", rel, ts.Name.Name)
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ix, ok := n.(*ast.IndexExpr)
			if !ok {
				return true
			}
			if b, ok := ix.Index.(*ast.BinaryExpr); ok && b.Op == token.QUO {
				if c, ok := b.X.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "len" {
						if lit, ok := b.Y.(*ast.BasicLit); ok && lit.Value == "2" {
							t.Errorf("%s: %s takes the middle of a slice: use verdict.Median", rel, fset.Position(ix.Pos()))
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("read %d Go files outside internal/verdict: the walk did not reach the repository", seen)
	}
}

var statsName = map[string]bool{"Median": true, "Percentile": true, "Summarize": true}
