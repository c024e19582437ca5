package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// Every schema id the code writes or reads is documented in
// docs/schemas.md, and every id in the current style ovpnperf/NAME/vN
// unless the document lists it under its legacy names.
func TestSchemasDocumented(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "schemas.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, legacy, _ := strings.Cut(string(doc), "## Legacy names")
	id := regexp.MustCompile(`"(ovpnperf(?:/[a-z][a-z0-9-]*(?:/v[0-9]+)?|\.[a-z.-]+/v?[0-9]+))"`)
	style := regexp.MustCompile(`^ovpnperf/[a-z][a-z0-9-]*/v[0-9]+$`)
	found := map[string]string{}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.Contains(line, "chema") { // schema ids stand in Schema constants and fields
					continue
				}
				for _, m := range id.FindAllStringSubmatch(line, -1) {
					found[m[1]] = path
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) < 10 {
		t.Fatalf("found only %d schema ids in the code: %v", len(found), found)
	}
	for s, where := range found {
		if !strings.Contains(string(doc), "`"+s+"`") {
			t.Errorf("%s (in %s) is not in docs/schemas.md", s, where)
		}
		if !style.MatchString(s) && !strings.Contains(legacy, "`"+s+"`") {
			t.Errorf("%s (in %s) is not of the form ovpnperf/NAME/vN and not listed as a legacy name", s, where)
		}
	}
}

// Every refusal kind and figure key a run document's rows may carry is in
// docs/schemas.md's table of refusals, and the table names no other kind.
func TestRefusalsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "schemas.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Refusals in run documents")
	section, _, _ = strings.Cut(section, "\n## ")
	kinds := map[string]bool{}
	for _, k := range measure.RefusalKinds() {
		kinds[k] = true
		if !strings.Contains(section, "| `"+k+"` |") {
			t.Errorf("refusal kind %s has no row in docs/schemas.md", k)
		}
	}
	for _, k := range measure.RefusalFigureKeys() {
		if !strings.Contains(section, "`"+k+"`") {
			t.Errorf("refusal figure %s is not in docs/schemas.md", k)
		}
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(section, -1)
	if len(rows) != len(measure.RefusalKinds()) {
		t.Errorf("docs/schemas.md lists %d refusal kinds, the code %d", len(rows), len(measure.RefusalKinds()))
	}
	for _, m := range rows {
		if !kinds[m[1]] {
			t.Errorf("docs/schemas.md lists refusal kind %s, which the code does not have", m[1])
		}
	}
}
