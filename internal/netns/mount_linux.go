package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Create makes a named network namespace without moving the caller, the way
// iproute2 does it (ip/ipnetns.c netns_add): make Dir a shared mount of
// itself first, create the file, then bind the new namespace onto it.
//
// Equivalent to: ip netns add NAME
func Create(name string) error {
	if err := prepareDir(); err != nil {
		return err
	}
	path := Path(name)
	// O_EXCL: a name that exists (mounted or hidden) is never reused.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	f.Close()
	err = onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		// Equivalent to: mount --bind /proc/self/task/TID/ns/net PATH
		return unix.Mount(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()), path, "none", unix.MS_BIND, "")
	}, nil)
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	return nil
}

// prepareDir makes Dir a shared bind mount of itself, exactly as iproute2
// does before its first namespace mount. Without it, the first `ip netns
// add` after ovpnperf's namespaces (on a host whose /run is not a shared
// mount) bind-mounts Dir over itself and hides them: their names can then
// be neither entered nor removed. A shared mount also lets an unmount in one
// mount namespace reach the copies in the others (ip netns exec, containers),
// so a deleted namespace is freed at once. The flock serialises this with
// concurrent ip and ovpnperf processes, which would otherwise stack several
// bind mounts (Debian bug 949235); like ip, go on without it if it cannot
// be taken.
//
// Equivalent to: mount --make-rshared /run/netns, or if that fails because
// it is no mount point: mount --rbind /run/netns /run/netns first.
func prepareDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", Dir, err)
	}
	if lock, err := os.Open(Dir); err == nil {
		defer lock.Close()
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX) == nil {
			defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		}
	}
	made := false
	for {
		err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		// EINVAL: Dir is not a mount point yet; make it one, once.
		if !errors.Is(err, unix.EINVAL) || made {
			return fmt.Errorf("mount --make-shared %s: %w", Dir, err)
		}
		if err := unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount --bind %s %s: %w", Dir, Dir, err)
		}
		made = true
	}
}

// Delete unmounts and removes a named namespace. A namespace that does not
// exist is not an error (delete is idempotent). Every namespace mount
// stacked on the name is removed, lazily: a busy one is detached and goes
// with its last user. A name that a later mount on Dir hides is reported as
// a *HiddenError; no mount other than the namespace's own is touched.
//
// Equivalent to: ip netns del NAME
func Delete(name string) error {
	path := Path(name)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// Several namespace mounts can be stacked on one name (ip netns attach,
	// or a mount propagated from another mount namespace): take them all.
	for i := 0; i < 16 && isNsMount(path); i++ {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("deleting network namespace %s: umount %s: %w", name, path, err)
		}
	}
	err := os.Remove(path)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if errors.Is(err, unix.EBUSY) {
		if h := hidden(path); h != nil {
			return h
		}
	}
	return fmt.Errorf("deleting network namespace %s: %w", name, err)
}

// nsfsMagic is NSFS_MAGIC from linux/magic.h, the file system type of a
// namespace file.
const nsfsMagic = 0x6e736673

// isNsMount reports whether path resolves to a mounted namespace file (what
// the name reaches, not what may hide under it).
func isNsMount(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

// HiddenError says that a namespace's name is covered by a later mount on
// Dir that ovpnperf did not make (for example a non-recursive `mount --bind
// /run/netns /run/netns`): the namespace stays mounted under it, out of reach
// by name. The kernel offers no way to unmount it without removing the
// covering mount, which belongs to someone else, so ovpnperf does not.
type HiddenError struct {
	Name   string
	Covers []string // mountinfo lines of the mounts on Dir above it
}

func (e *HiddenError) Error() string {
	return fmt.Sprintf("network namespace %s is hidden under %d later mount(s) on %s that ovpnperf did not make (see /proc/self/mountinfo); it stays until that mount is removed (umount %s), then run `ovpnperf lab clean` again",
		e.Name, len(e.Covers), Dir, Dir)
}

// Hidden reports whether a name is a namespace mount in mountinfo that a
// later mount on Dir keeps the name from reaching.
func Hidden(name string) bool {
	path := Path(name)
	return !isNsMount(path) && hidden(path) != nil
}

// hidden looks in /proc/self/mountinfo for a namespace mount on path that a
// later mount on Dir covers; nil when there is none.
func hidden(path string) *HiddenError {
	mounts, err := readMountinfo()
	if err != nil {
		return nil
	}
	var ns *mountEntry
	for i := range mounts {
		if mounts[i].point == path && mounts[i].fstype == "nsfs" {
			ns = &mounts[i]
			break
		}
	}
	if ns == nil {
		return nil
	}
	e := &HiddenError{Name: filepath.Base(path)}
	for _, m := range mounts {
		if m.point == Dir && m.id != ns.parent && m.id > 0 {
			e.Covers = append(e.Covers, m.line)
		}
	}
	if len(e.Covers) == 0 {
		return nil
	}
	return e
}

type mountEntry struct {
	id, parent int
	root       string // for a namespace file: net:[INODE]
	point      string
	fstype     string
	line       string
}

// readMountinfo parses /proc/self/mountinfo (proc(5)): ID PARENT MAJ:MIN
// ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS.
func readMountinfo() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(string(b)), nil
}

func parseMountinfo(s string) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		m := mountEntry{line: line, root: f[3], point: unescapeMountinfo(f[4])}
		m.id, _ = strconv.Atoi(f[0])
		m.parent, _ = strconv.Atoi(f[1])
		for i := 6; i < len(f)-1; i++ {
			if f[i] == "-" {
				m.fstype = f[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) the kernel
// writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Inode returns the inode number that identifies a named namespace (as in
// /proc/PID/ns/net), whether its name reaches it or a later mount hides it.
func Inode(name string) (uint64, bool) {
	path := Path(name)
	if isNsMount(path) {
		var st unix.Stat_t
		if unix.Stat(path, &st) == nil {
			return st.Ino, true
		}
	}
	mounts, err := readMountinfo()
	if err != nil {
		return 0, false
	}
	for _, m := range mounts {
		if m.point == path && m.fstype == "nsfs" && strings.HasPrefix(m.root, "net:[") {
			if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(m.root, "net:["), "]"), 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// Self returns the inode of the calling process's network namespace, the
// name it has under /run/netns ("" when none of them is it), and whether it
// is the namespace of pid 1 (the host's, as far as this process can tell).
// A program started with `ip netns exec NAME` learns NAME this way, so that
// what it records can be found again from outside the namespace.
//
// Equivalent to: ip netns identify $$
func Self() (inode uint64, name string, host bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, "", false, fmt.Errorf("reading own network namespace: %w", err)
	}
	inode = st.Ino
	var init unix.Stat_t
	host = unix.Stat("/proc/1/ns/net", &init) == nil && init.Ino == inode
	entries, _ := os.ReadDir(Dir)
	for _, e := range entries {
		if n, ok := Inode(e.Name()); ok && n == inode {
			return inode, e.Name(), host, nil
		}
	}
	return inode, "", host, nil
}
