// Package netns is the only package in ovpnperf that switches network
// namespaces. Everything else either asks it for a netlink handle bound to a
// namespace (which never moves the caller's thread), asks it to run a function
// inside a namespace, or starts programs through `ip netns exec`.
//
// Namespaces are named and bind-mounted under /run/netns exactly as
// `ip netns add` does, so `ip netns exec NAME …` works on every lab node.
package netns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where iproute2 bind-mounts named namespaces.
const Dir = "/run/netns"

// Path returns the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// Exists reports whether a named namespace exists: its file is there,
// mounted or hidden under a later mount.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Do runs fn with the calling goroutine's OS thread inside the named
// namespace, following containernetworking/plugins pkg/ns: a fresh goroutine
// locks its thread, switches, runs fn, switches back, and unlocks only if the
// switch back worked. fn must not start goroutines that expect to be in the
// namespace. Sockets opened inside fn stay in the namespace wherever they are
// used afterwards.
func Do(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	defer target.Close()
	return onThread(func() error {
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("entering network namespace %s: %w", name, err)
		}
		return nil
	}, fn)
}

// onThread runs enter and then fn on a fresh goroutine locked to its OS
// thread, and moves the thread back to its original namespace afterwards.
// enter may move the thread; whether it succeeds or not, the thread is moved back. If
// moving back fails the thread stays locked and dies with the goroutine, so
// no other goroutine ever runs in the wrong namespace.
func onThread(enter, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("reading current network namespace: %w", err)
			return
		}
		defer orig.Close()
		var ferr error
		if ferr = enter(); ferr == nil && fn != nil {
			ferr = fn()
		}
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("switching back to the original network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Handle returns a netlink handle whose requests act in the named namespace;
// the caller's thread never moves. Close it when done.
func Handle(name string) (*netlink.Handle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return h, nil
}

// Fd opens the named namespace and returns its handle, for APIs such as
// netlink.LinkAttrs.Namespace that take a namespace file descriptor. Close it
// when done.
func Fd(name string) (netns.NsHandle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return 0, fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	return ns, nil
}

// Listen opens a listener on address inside the named namespace (in the
// caller's own when name is ""). The socket stays in that namespace: Accept
// and Close work from any goroutine, so a server in a lab listens on the
// lab's addresses without moving any thread but the one that opened it.
//
// Equivalent to: ip netns exec NAME <server listening on address>
func Listen(name, network, address string) (net.Listener, error) {
	if name == "" {
		return net.Listen(network, address)
	}
	var l net.Listener
	err := Do(name, func() error {
		var err error
		l, err = net.Listen(network, address)
		if err != nil {
			return fmt.Errorf("in network namespace %s: %w", name, err)
		}
		return nil
	})
	return l, err
}

// WriteSys writes value to the sysfs file /sys/rel as the named namespace
// sees it (InSysfs).
//
// Equivalent to: ip netns exec NAME sh -c 'echo VALUE > /sys/REL'
func WriteSys(name, rel, value string) error {
	return InSysfs(name, func() error {
		if err := os.WriteFile(filepath.Join("/sys", rel), []byte(value), 0); err != nil {
			return fmt.Errorf("in %s: %w", name, err)
		}
		return nil
	})
}

// InSysfs runs fn where /sys is the named namespace's (/sys/class/net
// lists only the namespace of whoever mounted sysfs, so entering the
// namespace is not enough). A fresh thread unshares its mount namespace,
// makes every mount a slave so nothing it mounts reaches the host, enters
// the network namespace, mounts a sysfs of it on /sys and runs fn; the
// thread is never unlocked, so it dies with its goroutine and no other
// goroutine runs in its namespaces. /proc stays the host's.
//
// Equivalent to: ip netns exec NAME … (which mounts such a /sys)
func InSysfs(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("unsharing the mount namespace: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
				return fmt.Errorf("making / a slave mount: %w", err)
			}
			if err := netns.Set(target); err != nil {
				return fmt.Errorf("entering network namespace %s: %w", name, err)
			}
			if err := unix.Mount(name, "/sys", "sysfs", 0, ""); err != nil {
				return fmt.Errorf("mounting sysfs of %s: %w", name, err)
			}
			return fn()
		}()
	}()
	return <-errc
}
