package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// One-port mode: stock clients keep `remote HOST PORT`; the kernel picks
// the instance. For each protocol, in the namespace where the instances
// listen, one chain per table:
//
//	nat PREROUTING -p P --dport PORT -j ovpnperf-ID-P
//
// Backend "iptables-nth" (--spread counter, the default; nftables calls it
// numgen inc): rule i of n says
//
//	nat ovpnperf-ID-P -m statistic --mode nth --every n-i --packet 0
//	                  -j REDIRECT --to-ports BASE+i
//
// The nat table sees only the first packet of a flow, so new flows go to
// the instances in turn (exact balance) and conntrack keeps each flow's
// later packets, and the un-NAT of its replies, on its instance.
//
// Backend "iptables-hmark" (--spread hash): a hash of the source address
// and port picks the instance, so the choice survives a lost conntrack
// entry, but the balance is only statistical:
//
//	mangle PREROUTING -p P --dport PORT -j ovpnperf-ID-P
//	mangle ovpnperf-ID-P -j HMARK --hmark-tuple src,sport --hmark-mod n
//	                      --hmark-offset 0x100 --hmark-rnd R
//	nat ovpnperf-ID-P -m mark --mark 0x100+i -j REDIRECT --to-ports BASE+i

// One-port backends.
const (
	BackendNth   = "iptables-nth"
	BackendHMARK = "iptables-hmark"
)

// Spread values of --spread.
const (
	SpreadCounter = "counter"
	SpreadHash    = "hash"
)

func chainName(id, proto string) string { return "ovpnperf-" + id + "-" + proto }

// iptables runs iptables in a namespace ("" the host's). Production code
// runs the real one (iptables{run: inNs}); unit tests give a run that
// records the argv, so the rule orchestration is checked without root.
// It is a value, not a package variable: nothing replaces it for everyone.
type iptables struct {
	run func(ctx context.Context, ns string, argv ...string) ([]byte, error)
}

// table runs `iptables -w -t TABLE ARGS…` in ns.
func (t iptables) table(ctx context.Context, ns, table string, args ...string) ([]byte, error) {
	return t.run(ctx, ns, append([]string{"iptables", "-w", "-t", table}, args...)...)
}

// onePortRules returns the rules of the cluster's chains for one protocol,
// each the argv after `iptables -w -t TABLE`.
func onePortRules(id, proto string, ports []uint16, backend string, rnd uint32) (mangle, nat [][]string) {
	ch := chainName(id, proto)
	n := len(ports)
	if backend == BackendHMARK {
		mangle = [][]string{{"-A", ch, "-j", "HMARK", "--hmark-tuple", "src,sport", "--hmark-mod", strconv.Itoa(n),
			"--hmark-offset", "0x100", "--hmark-rnd", fmt.Sprintf("0x%x", rnd)}}
		for i, p := range ports {
			nat = append(nat, []string{"-A", ch, "-p", proto, "-m", "mark", "--mark", fmt.Sprintf("0x%x", 0x100+i),
				"-j", "REDIRECT", "--to-ports", strconv.Itoa(int(p))})
		}
		return
	}
	for i, p := range ports {
		// Rule i sees the flows the earlier rules left: one in n-i of them is its.
		nat = append(nat, []string{"-A", ch, "-p", proto, "-m", "statistic", "--mode", "nth", "--every", strconv.Itoa(n - i),
			"--packet", "0", "-j", "REDIRECT", "--to-ports", strconv.Itoa(int(p))})
	}
	return
}

// probeHMARK reports whether the HMARK target is available in ns.
func probeHMARK(ctx context.Context, ns string) bool {
	out, err := inNs(ctx, ns, "iptables", "-j", "HMARK", "--help")
	return err == nil && strings.Contains(string(out), "hmark-tuple")
}

// addOnePort installs the rules for one protocol; the chain is recorded by
// the caller before this runs.
//
// Equivalent to: iptables -t mangle -N CH; iptables -t mangle -A CH -j HMARK …;
// iptables -t mangle -I PREROUTING -p P --dport PORT -j CH; likewise in nat.
func (t iptables) addOnePort(ctx context.Context, ns, id, proto string, port uint16, ports []uint16, backend string, rnd uint32) error {
	ch := chainName(id, proto)
	mangle, nat := onePortRules(id, proto, ports, backend, rnd)
	jump := []string{"-I", "PREROUTING", "-p", proto, "--dport", strconv.Itoa(int(port)), "-j", ch}
	for _, tb := range []struct {
		name  string
		rules [][]string
	}{{"mangle", mangle}, {"nat", nat}} {
		if len(tb.rules) == 0 {
			continue
		}
		if _, err := t.table(ctx, ns, tb.name, "-N", ch); err != nil {
			return err
		}
		for _, r := range tb.rules {
			if _, err := t.table(ctx, ns, tb.name, r...); err != nil {
				return err
			}
		}
		if _, err := t.table(ctx, ns, tb.name, jump...); err != nil {
			return err
		}
	}
	return nil
}

// deleteChain removes a one-port chain and its jumps from both tables,
// ignoring what is already gone. Detail is "proto port".
func (t iptables) deleteChain(ctx context.Context, r Resource) error {
	f := strings.Fields(r.Detail)
	if len(f) != 2 || !strings.HasPrefix(r.Name, "ovpnperf-") {
		return fmt.Errorf("state: bad iptables chain record %+v", r)
	}
	for _, table := range []string{"mangle", "nat"} {
		// Delete every jump (a repeated rule would be left otherwise).
		for i := 0; i < 8; i++ {
			if _, err := t.table(ctx, r.Netns, table, "-D", "PREROUTING", "-p", f[0], "--dport", f[1], "-j", r.Name); err != nil {
				break
			}
		}
		_, _ = t.table(ctx, r.Netns, table, "-F", r.Name)
		_, _ = t.table(ctx, r.Netns, table, "-X", r.Name)
	}
	return nil
}

// chainExists reports whether chain is present in ns's table (for leak checks).
func chainExists(ctx context.Context, ns, table, chain string) bool {
	_, err := iptables{run: inNs}.table(ctx, ns, table, "-n", "-L", chain)
	return err == nil
}
