package netns

import "testing"

// Lines as /proc/self/mountinfo shows them after a non-recursive
// `mount --bind /run/netns /run/netns` over a lab's namespace (captured on
// Linux 6.18 in a private mount namespace).
const hiddenMountinfo = `1054 562 0:50 / /run rw,relatime - tmpfs tmpfs rw
1055 1054 0:50 /netns /run/netns rw,relatime shared:14 - tmpfs tmpfs rw
1013 1055 0:4 net:[4026533263] /run/netns/ovpnperf-x-a rw shared:15 - nsfs nsfs rw
995 1055 0:50 /netns /run/netns rw,relatime shared:14 - tmpfs tmpfs rw
1100 562 0:51 / /mnt/with\040space rw - tmpfs tmpfs rw`

func TestParseMountinfo(t *testing.T) {
	m := parseMountinfo(hiddenMountinfo)
	if len(m) != 5 {
		t.Fatalf("parsed %d mounts, want 5", len(m))
	}
	ns := m[2]
	if ns.id != 1013 || ns.parent != 1055 || ns.point != "/run/netns/ovpnperf-x-a" || ns.fstype != "nsfs" || ns.root != "net:[4026533263]" {
		t.Errorf("namespace mount parsed as %+v", ns)
	}
	if m[4].point != "/mnt/with space" {
		t.Errorf("escaped mount point parsed as %q", m[4].point)
	}
}
