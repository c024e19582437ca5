package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks: every relative link of README.md, ARCHITECTURE.md and
// docs/*.md, and every docs/PAGE.md#anchor a code comment cites, names a
// file that exists and, with an anchor, a heading of that file (GitHub's
// anchors: lower case, punctuation dropped, spaces as hyphens). Figures
// move between pages (the design stays, measurements go to
// docs/measurements.md); a link left behind fails here.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "ARCHITECTURE.md"))
	anchors := map[string]map[string]bool{}
	exists := func(path, anchor string) bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		if anchor == "" {
			return true
		}
		a, ok := anchors[path]
		if !ok {
			a = headingAnchors(t, path)
			anchors[path] = a
		}
		return a[anchor]
	}
	links := 0
	mdLink := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			l := m[1]
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(l, "#")
			target := p
			if file != "" {
				target = filepath.Join(filepath.Dir(p), file)
			}
			links++
			if !exists(target, anchor) {
				t.Errorf("%s links to %s, which is not there", docRel(root, p), l)
			}
		}
	}
	cited := regexp.MustCompile(`docs/([\w.-]+\.md)#([\w-]+)`)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			links++
			if !exists(filepath.Join(root, "docs", m[1]), m[2]) {
				t.Errorf("%s cites %s, which is not there", docRel(root, p), m[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links < 50 {
		t.Fatalf("checked %d links: the pages were not read", links)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file (outside fenced code blocks).
func headingAnchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(text))
		if n, dup := seen[a]; dup {
			seen[a] = n + 1
			out[a+"-"+strconv.Itoa(n+1)] = true
			continue
		}
		seen[a] = 0
		out[a] = true
	}
	return out
}

func docRel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}
