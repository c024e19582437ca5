package overhead

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The packet sizes of plain TCP have one home: every package that needs
// them takes TCPSegmentBytes or TCPFrameBytes from here, and a literal of
// either in other code is a copy of the decision.
func TestSegmentSizesHaveOneHome(t *testing.T) {
	t.Parallel()
	literal := regexp.MustCompile(`\b(1448|1514)\b`)
	root := filepath.Join("..", "..")
	var found []string
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join(root, "internal", "overhead", "ethernet.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				code, _, _ := strings.Cut(line, "//")
				if literal.MatchString(code) {
					found = append(found, fmt.Sprintf("%s:%d: %s", path, i+1, strings.TrimSpace(line)))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("TCP segment or frame sizes typed outside internal/overhead (use TCPSegmentBytes, TCPFrameBytes, TCPGoodputShare):\n%s", strings.Join(found, "\n"))
	}
}
