package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/golden"
	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestSplitPool(t *testing.T) {
	for _, tc := range []struct {
		pool string
		n    int
		want string
	}{
		{"10.8.0.0/16", 2, "10.8.0.0/17 10.8.128.0/17"},
		{"10.8.0.0/16", 3, "10.8.0.0/18 10.8.64.0/18 10.8.128.0/18"},
		{"203.0.113.0/24", 4, "203.0.113.0/26 203.0.113.64/26 203.0.113.128/26 203.0.113.192/26"},
		{"10.0.0.0/8", 1, "10.0.0.0/8"},
		{"fd00:8::/64", 2, "fd00:8::/65 fd00:8:0:0:8000::/65"},
		{"10.255.255.0/24", 2, "10.255.255.0/25 10.255.255.128/25"},
	} {
		ps, err := SplitPool(netip.MustParsePrefix(tc.pool), tc.n)
		if err != nil {
			t.Fatalf("%s/%d: %v", tc.pool, tc.n, err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("SplitPool(%s, %d) = %s, want %s", tc.pool, tc.n, g, tc.want)
		}
		for i := range ps {
			for j := range ps {
				if i != j && ps[i].Overlaps(ps[j]) {
					t.Errorf("%s and %s overlap", ps[i], ps[j])
				}
			}
		}
	}
	if _, err := SplitPool(netip.MustParsePrefix("10.0.0.0/28"), 4); !usage.Is(err) {
		t.Errorf("a /28 for 4 instances: %v, want a usage error", err)
	}
}

func TestCheckBaseRefuses(t *testing.T) {
	for _, tc := range []struct{ conf, why string }{
		{"server-bridge 10.8.0.4 255.255.255.0 10.8.0.128 10.8.0.254\ndev tap0\n", "tap"},
		{"dev tun\nserver-bridge\n", "layer-2"},
		{"dev tun\nserver 10.8.0.0 255.255.255.0\nifconfig-pool-persist ipp.txt\n", "persistence"},
		{"client\nremote x 1194\n", "client config"},
		{"dev tun\nsecret static.key\n", "static-key"},
		{"dev tun\n", "no `server"},
	} {
		c, err := openvpn.ParseString(tc.conf)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckBase(c)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("CheckBase(%q) = %v, want a usage error mentioning %q", tc.conf, err, tc.why)
		}
	}
}

func TestPlanRendersInstances(t *testing.T) {
	base, err := openvpn.ParseString(`port 1194
proto udp
dev tun
server 10.8.0.0 255.255.0.0
server-ipv6 fd00:8::/64
client-to-client
status /var/log/openvpn-status.log
management 127.0.0.1 7505
log /var/log/openvpn.log
daemon
ca ca.crt
cert server.crt
key server.key
`)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := Plan(PlanOptions{ID: "ab12", Dir: "/run/ovpnperf/cluster/ab12", Base: base, Instances: 2, Protos: []string{"udp", "tcp"},
		PortBase: 1195, Pool: netip.MustParsePrefix("10.8.0.0/16"), CPUs: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 4 {
		t.Fatalf("%d instances, want 4", len(specs))
	}
	text, _ := specs[3].Config.Render()
	for _, want := range []string{"dev ovpnperfab12t1\n", "proto tcp-server\n", "port 1196\n", "server 10.8.192.0 255.255.192.0\n",
		"server-ipv6 fd00:8:0:0:c000::/66\n", "status /run/ovpnperf/cluster/ab12/t1.status 5\n",
		"management /run/ovpnperf/cluster/ab12/run/t1.mgmt unix\n", "push \"route 10.8.0.0 255.255.0.0\"\n", "push \"route-ipv6 fd00:8::/64\"\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("instance t1 config lacks %q:\n%s", want, text)
		}
	}
	for _, gone := range []string{"127.0.0.1 7505", "daemon", "openvpn.log", "port 1194"} {
		if strings.Contains(text, gone) {
			t.Errorf("instance config keeps %q:\n%s", gone, text)
		}
	}
	if specs[3].CPU != 1 || specs[2].CPU != 0 {
		t.Errorf("CPUs %d %d", specs[2].CPU, specs[3].CPU)
	}
}

// The iptables commands of one-port mode, as a recording fake sees them:
// chain, rules and jump per table on install, and every jump, flush and
// delete on removal (golden files in testdata).
func TestOnePortCommands(t *testing.T) {
	for _, tc := range []struct {
		golden, proto, backend string
		ports                  []uint16
	}{
		{"oneport-nth.txt", "udp", BackendNth, []uint16{1195, 1196, 1197}},
		{"oneport-hmark.txt", "tcp", BackendHMARK, []uint16{1195, 1196}},
	} {
		fake := hostnet.NewFake("ovpnperf-lab-server")
		h := &recordingHost{Fake: fake}
		if err := addOnePort(context.Background(), h, "ab12", tc.proto, 1194, tc.ports, tc.backend, 0x2a); err != nil {
			t.Fatal(err)
		}
		lines := append(h.lines, "# the namespace then", fake.String())
		// Another's chain and jump in the same tables stay.
		if err := fake.Restore(context.Background(), hostnet.IPv4, "nat", []string{":someone-elses - [0:0]", "-A PREROUTING -p udp --dport 53 -j someone-elses"}); err != nil {
			t.Fatal(err)
		}
		if err := deleteChain(context.Background(), h, Resource{Netns: "ovpnperf-lab-server", Name: chainName("ab12", tc.proto), Detail: tc.proto + " 1194"}); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "# after clean", fake.String())
		// Clean again: nothing left to remove is not an error.
		if err := deleteChain(context.Background(), h, Resource{Netns: "ovpnperf-lab-server", Name: chainName("ab12", tc.proto), Detail: tc.proto + " 1194"}); err != nil {
			t.Errorf("second clean: %v", err)
		}
		golden.Check(t, filepath.Join("testdata", tc.golden), []byte(strings.Join(lines, "\n")+"\n"))
	}
	if err := deleteChain(context.Background(), hostnet.NewFake(""), Resource{Name: "someone-elses", Detail: "udp 1194"}); err == nil {
		t.Error("deleteChain took a chain that is not ovpnperf's")
	}
}

// recordingHost is a Fake that writes down each netfilter batch it is
// given, as iptables-restore would read it.
type recordingHost struct {
	*hostnet.Fake
	lines []string
}

func (r *recordingHost) Restore(ctx context.Context, f hostnet.Family, table string, rules []string) error {
	r.lines = append(r.lines, fmt.Sprintf("[%s] %s-restore --noflush -w", r.Netns(), map[hostnet.Family]string{hostnet.IPv4: "iptables", hostnet.IPv6: "ip6tables"}[f]), "*"+table)
	r.lines = append(r.lines, rules...)
	r.lines = append(r.lines, "COMMIT")
	return r.Fake.Restore(ctx, f, table, rules)
}
