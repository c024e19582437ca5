package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// A library keeps no state that one caller or test can change for every
// other: an exported package-level variable is such state (a table a caller
// appends to, a default a test overwrites, buckets a test shrinks), and it
// keeps the tests that read it from running in parallel. Only error sentinels
// stay variables, as Go has it: a name starting with Err whose value is
// errors.New(...) or fmt.Errorf(...).
func TestNoExportedPackageVariables(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, v := range exportedPackageVars(f) {
			pos := fset.Position(v.Pos())
			rel, _ := filepath.Rel(root, pos.Filename)
			t.Errorf("%s:%d: exported package variable %s: any caller can change it for everyone; "+
				"make it a const, a func returning a fresh value, or an unexported var with an accessor that returns a copy",
				rel, pos.Line, v.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have read the packages it guards: a moved tree would
	// otherwise pass with nothing checked.
	if files < 100 {
		t.Fatalf("read %d Go files under internal/, expected the whole tree", files)
	}
}

// exportedPackageVars returns the names of f's exported package-level
// variables that are not error sentinels.
func exportedPackageVars(f *ast.File) []*ast.Ident {
	var out []*ast.Ident
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !name.IsExported() {
					continue
				}
				if i < len(vs.Values) && isErrorSentinel(name.Name, vs.Values[i]) {
					continue
				}
				out = append(out, name)
			}
		}
	}
	return out
}

// isErrorSentinel reports whether name = value declares a sentinel error:
// ErrX = errors.New(...) or ErrX = fmt.Errorf(...).
func isErrorSentinel(name string, value ast.Expr) bool {
	if !strings.HasPrefix(name, "Err") {
		return false
	}
	call, ok := value.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	return pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf"
}

// The check itself must find what it is for: an exported variable, one in
// a var block, and a var named Err that is not an error; and leave sentinels
// and unexported variables alone.
func TestExportedPackageVarsFinds(t *testing.T) {
	t.Parallel()
	src := `package p

import ("errors"; "fmt")

var X = 1
var (
	y = 2
	Table = []string{"a"}
	ErrGone = errors.New("gone")
	ErrWrap = fmt.Errorf("wrap: %w", ErrGone)
	ErrNot = 3
)
var A, b int
func F() { var Local = 1; _ = Local }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range exportedPackageVars(f) {
		got = append(got, id.Name)
	}
	if want := "X Table ErrNot A"; strings.Join(got, " ") != want {
		t.Fatalf("found %q, want %q", strings.Join(got, " "), want)
	}
}
