package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ARCHITECTURE.md's package map is the truth about layering: every package
// has a row, every row a package, and every import goes to a lower layer.
func TestArchitectureLayers(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	layers := readLayerTable(t, filepath.Join(root, "ARCHITECTURE.md"))

	list := exec.Command("go", "list", "-json", "./...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/ovpnperf/ovpnperf/"
	seen := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(p.ImportPath, mod)
		seen[pkg] = true
		l, ok := layers[pkg]
		if !ok {
			t.Errorf("%s has no row in ARCHITECTURE.md's package map", pkg)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			if dl, ok := layers[dep]; ok && dl >= l {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go to lower layers only", pkg, l, dep, dl)
			}
		}
	}
	for pkg := range layers {
		if !seen[pkg] {
			t.Errorf("ARCHITECTURE.md names %s, which is not a package of the module", pkg)
		}
	}
}

// readLayerTable reads the rows "| package | layer | … |" of the file.
func readLayerTable(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\| ((?:internal|cmd|docs)/[a-z0-9/]+) \| (\d+) \|`)
	layers := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if _, dup := layers[m[1]]; dup {
			t.Errorf("ARCHITECTURE.md lists %s twice", m[1])
		}
		layers[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(layers) == 0 {
		t.Fatalf("%s: no package rows found", path)
	}
	return layers
}
