package openvpn

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// letters, digits, '-' and '_' kept, spaces turned into '-', everything
// else dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// factsAnchors reads FactsDoc and returns the anchors of its headings.
func factsAnchors(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, FactsDoc))
	if err != nil {
		t.Fatalf("the facts the code cites must ship with it: %v", err)
	}
	anchors := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		a := githubAnchor(strings.TrimLeft(line, "#"))
		if anchors[a] {
			t.Errorf("%s: two headings share the anchor %q; citations would be ambiguous", FactsDoc, a)
		}
		anchors[a] = true
	}
	return anchors
}

var (
	// citeLiteral is a citation written out: docs/openvpn-facts.md#anchor.
	citeLiteral = regexp.MustCompile(`docs/openvpn-facts\.md#([A-Za-z0-9_-]*)`)
	// citeRelative is a link to a heading from a page beside it in docs/.
	citeRelative = regexp.MustCompile(`\(openvpn-facts\.md#([A-Za-z0-9_-]*)\)`)
	// citeCall is a citation through Fact("anchor").
	citeCall = regexp.MustCompile(`\bFact\(("(?:[^"\\]|\\.)*")\)`)
	// anyMention is every mention of the facts file, cited or not.
	anyMention = regexp.MustCompile(`[\w./-]*openvpn-facts[\w./#-]*`)
	// internalRecord is text that points the user at something they
	// cannot open: an issue number or an internal record.
	internalRecord = regexp.MustCompile(`(?i)\bissue\s*#?\d|\brecord\)|\binternal record`)
)

// sourceFiles lists the Go files and Markdown documents of the project,
// except this test (whose patterns would match themselves).
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "facts_test.go") && filepath.Base(filepath.Dir(p)) == "openvpn" {
			return nil
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestFactCitations checks that every citation of docs/openvpn-facts.md in
// the code and the documents (comments included) names a heading that
// exists, that the file is never mentioned in another form (a path users
// do not have, a nickname), and that the helper's own output resolves.
func TestFactCitations(t *testing.T) {
	t.Parallel()
	anchors := factsAnchors(t)
	cited := 0
	for _, p := range sourceFiles(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		rel, _ := filepath.Rel(repoRoot, p)
		for _, m := range citeLiteral.FindAllStringSubmatch(text, -1) {
			cited++
			if !anchors[m[1]] {
				t.Errorf("%s cites %s, which is no heading of %s", rel, m[0], FactsDoc)
			}
		}
		if strings.HasSuffix(p, ".go") {
			for _, m := range citeCall.FindAllStringSubmatch(text, -1) {
				a, err := strconv.Unquote(m[1])
				cited++
				if err != nil || !anchors[a] {
					t.Errorf("%s cites Fact(%s), which is no heading of %s", rel, m[1], FactsDoc)
				}
			}
		}
		if rel == FactsDoc {
			continue
		}
		// A page beside it in docs/ links to it relatively.
		inDocs := filepath.Dir(rel) == "docs"
		if inDocs {
			for _, m := range citeRelative.FindAllStringSubmatch(text, -1) {
				cited++
				if !anchors[m[1]] {
					t.Errorf("%s links to %s, which is no heading of %s", rel, m[0], FactsDoc)
				}
			}
		}
		for _, m := range anyMention.FindAllString(text, -1) {
			if inDocs && (m == "openvpn-facts.md" || strings.HasPrefix(m, "openvpn-facts.md#")) {
				continue
			}
			if !strings.HasPrefix(m, "docs/openvpn-facts.md") {
				t.Errorf("%s mentions %q: cite the shipped file as %s#anchor (openvpn.Fact)", rel, m, FactsDoc)
			}
		}
	}
	if cited < 20 {
		t.Errorf("found %d citations; the scan no longer sees the code's citations", cited)
	}
	// The facts file's own links between its sections resolve too.
	data, _ := os.ReadFile(filepath.Join(repoRoot, FactsDoc))
	for _, m := range regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(string(data), -1) {
		if !anchors[m[1]] {
			t.Errorf("%s links to #%s, which is no heading", FactsDoc, m[1])
		}
	}
	if got := Fact("mssfix"); got != "docs/openvpn-facts.md#mssfix" || !anchors["mssfix"] {
		t.Errorf("Fact(\"mssfix\") = %q", got)
	}
}

// TestNoInternalRecords checks that no text a user sees (string literals
// of the program, the README, the shipped docs) names an issue number or
// an internal record: users can open neither.
func TestNoInternalRecords(t *testing.T) {
	t.Parallel()
	for _, p := range sourceFiles(t) {
		rel, _ := filepath.Rel(repoRoot, p)
		if strings.HasSuffix(p, ".md") {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(data), "\n") {
				if internalRecord.MatchString(line) {
					t.Errorf("%s:%d names something users cannot open: %s", rel, i+1, strings.TrimSpace(line))
				}
			}
			continue
		}
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && internalRecord.MatchString(s) {
				t.Errorf("%s: string %s names something users cannot open", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	}
}
