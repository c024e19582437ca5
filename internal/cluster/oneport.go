package cluster

import (
	"context"
	"fmt"
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

// onePortRules returns the rules of the cluster's chains for one protocol.
func onePortRules(id, proto string, ports []uint16, backend string, rnd uint32) (mangle, nat []string) {
	ch := chainName(id, proto)
	n := len(ports)
	if backend == BackendHMARK {
		mangle = []string{
			fmt.Sprintf("-A %s -j HMARK --hmark-tuple src,sport --hmark-mod %d --hmark-offset 0x100 --hmark-rnd 0x%x", ch, n, rnd),
		}
		for i, p := range ports {
			nat = append(nat, fmt.Sprintf("-A %s -p %s -m mark --mark 0x%x -j REDIRECT --to-ports %d", ch, proto, 0x100+i, p))
		}
		return
	}
	for i, p := range ports {
		// Rule i sees the flows the earlier rules left: one in n-i of them is its.
		nat = append(nat, fmt.Sprintf("-A %s -p %s -m statistic --mode nth --every %d --packet 0 -j REDIRECT --to-ports %d", ch, proto, n-i, p))
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
func addOnePort(ctx context.Context, ns, id, proto string, port uint16, ports []uint16, backend string, rnd uint32) error {
	ch := chainName(id, proto)
	mangle, nat := onePortRules(id, proto, ports, backend, rnd)
	match := []string{"-p", proto, "--dport", fmt.Sprint(port), "-j", ch}
	if len(mangle) > 0 {
		if _, err := inNs(ctx, ns, "iptables", "-w", "-t", "mangle", "-N", ch); err != nil {
			return err
		}
		for _, r := range mangle {
			if _, err := inNs(ctx, ns, append([]string{"iptables", "-w", "-t", "mangle"}, strings.Fields(r)...)...); err != nil {
				return err
			}
		}
		if _, err := inNs(ctx, ns, append([]string{"iptables", "-w", "-t", "mangle", "-I", "PREROUTING"}, match...)...); err != nil {
			return err
		}
	}
	if _, err := inNs(ctx, ns, "iptables", "-w", "-t", "nat", "-N", ch); err != nil {
		return err
	}
	for _, r := range nat {
		if _, err := inNs(ctx, ns, append([]string{"iptables", "-w", "-t", "nat"}, strings.Fields(r)...)...); err != nil {
			return err
		}
	}
	_, err := inNs(ctx, ns, append([]string{"iptables", "-w", "-t", "nat", "-I", "PREROUTING"}, match...)...)
	return err
}

// deleteChain removes a one-port chain and its jumps from both tables,
// ignoring what is already gone. Detail is "proto port".
func deleteChain(ctx context.Context, r Resource) error {
	f := strings.Fields(r.Detail)
	if len(f) != 2 || !strings.HasPrefix(r.Name, "ovpnperf-") {
		return fmt.Errorf("state: bad iptables chain record %+v", r)
	}
	for _, table := range []string{"mangle", "nat"} {
		// Delete every jump (a repeated rule would be left otherwise).
		for i := 0; i < 8; i++ {
			if _, err := inNs(ctx, r.Netns, "iptables", "-w", "-t", table, "-D", "PREROUTING", "-p", f[0], "--dport", f[1], "-j", r.Name); err != nil {
				break
			}
		}
		_, _ = inNs(ctx, r.Netns, "iptables", "-w", "-t", table, "-F", r.Name)
		_, _ = inNs(ctx, r.Netns, "iptables", "-w", "-t", table, "-X", r.Name)
	}
	return nil
}

// chainExists reports whether chain is present in ns's table (for leak checks).
func chainExists(ctx context.Context, ns, table, chain string) bool {
	_, err := inNs(ctx, ns, "iptables", "-w", "-t", table, "-n", "-L", chain)
	return err == nil
}
