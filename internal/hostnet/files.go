package hostnet

import (
	"fmt"
	"path"
	"strings"
)

// checkFilePath refuses a path outside /sys and /proc, or one that is not
// clean and absolute: the file methods are for the kernel's files only.
func checkFilePath(p string) error {
	if path.Clean(p) != p || !(strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/proc/")) {
		return fmt.Errorf("%q: not a clean path under /sys or /proc", p)
	}
	return nil
}
