package hostnet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// withFiles runs fn where /sys is the namespace's own: in a thread that
// mounted a sysfs of it (netns.InSysfs), or here for the caller's own.
// /proc is the host's either way (/proc/irq is global).
func (k kernel) withFiles(p string, fn func() error) error {
	if err := checkFilePath(p); err != nil {
		return err
	}
	if k.ns == "" {
		return fn()
	}
	return netns.InSysfs(k.ns, fn)
}

func (k kernel) ReadFile(ctx context.Context, p string) ([]byte, error) {
	var b []byte
	// Equivalent to: ip netns exec NS cat PATH
	err := k.withFiles(p, func() (err error) {
		b, err = os.ReadFile(p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", p, k.where(), err)
	}
	return b, nil
}

func (k kernel) ReadDir(ctx context.Context, dir string) ([]string, error) {
	var names []string
	// Equivalent to: ip netns exec NS ls DIR
	err := k.withFiles(dir, func() error {
		es, err := os.ReadDir(dir)
		for _, e := range es {
			names = append(names, e.Name())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", dir, k.where(), err)
	}
	return names, nil
}

func (k kernel) EvalSymlinks(ctx context.Context, p string) (string, error) {
	var r string
	// Equivalent to: ip netns exec NS readlink -e PATH
	err := k.withFiles(p, func() (err error) {
		r, err = filepath.EvalSymlinks(p)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("resolving %s in %s: %w", p, k.where(), err)
	}
	return r, nil
}

func (k kernel) WriteFile(ctx context.Context, p string, data []byte) error {
	// Equivalent to: ip netns exec NS sh -c 'echo VALUE > PATH'
	err := k.withFiles(p, func() error { return os.WriteFile(p, data, 0) })
	if err != nil {
		return fmt.Errorf("writing %q to %s in %s: %w", strings.TrimSpace(string(data)), p, k.where(), err)
	}
	return nil
}
