package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A test fails when its subject did not run (docs/testing.md). The
// simplest way to break that rule is a test that cannot fail at all: a
// Test function whose body calls none of its *testing.T's failing methods
// (Error, Errorf, Fatal, Fatalf, Fail, FailNow), runs no subtest and hands
// t to no helper. This finds such functions in every package's tests.
func TestEveryTestCanFail(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	tests := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tName := testingParam(fn)
			if tName == "" {
				continue
			}
			tests++
			if !canFail(fn.Body, tName) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: %s can never fail: it calls no %s.Error/Fatal, runs no subtest and passes %s to no helper", rel, fn.Name.Name, tName, tName)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The module has hundreds of tests: a walk that found few read the
	// wrong tree.
	if tests < 300 {
		t.Fatalf("found only %d tests under %s", tests, root)
	}
}

// testingParam is the name of fn's *testing.T parameter, "" if it has none.
func testingParam(fn *ast.FuncDecl) string {
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) != 1 {
		return ""
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return ""
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "T" {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "testing" {
		return ""
	}
	return ps[0].Names[0].Name
}

// canFail reports whether body has a call through which the test named
// tName can fail: a failing method or Run of tName, or a call that passes
// tName on.
func canFail(body *ast.BlockStmt, tName string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found {
			return !found
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == tName {
				switch sel.Sel.Name {
				case "Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow", "Run":
					found = true
				}
			}
		}
		for _, a := range call.Args {
			if id, ok := a.(*ast.Ident); ok && id.Name == tName {
				found = true
			}
		}
		return !found
	})
	return found
}
