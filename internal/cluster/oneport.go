package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
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

// probeHMARK reports whether the HMARK target is available in h.
// Equivalent to: iptables -j HMARK --help
func probeHMARK(ctx context.Context, h hostnet.Host) bool {
	return h.HasTarget(ctx, hostnet.IPv4, "HMARK", "hmark-tuple")
}

// addOnePort installs the rules for one protocol, one batch per table;
// the chain is recorded by the caller before this runs.
//
// Equivalent to: iptables -t mangle -N CH; iptables -t mangle -A CH -j HMARK …;
// iptables -t mangle -I PREROUTING -p P --dport PORT -j CH; likewise in nat.
func addOnePort(ctx context.Context, h hostnet.Host, id, proto string, port uint16, ports []uint16, backend string, rnd uint32) error {
	ch := chainName(id, proto)
	mangle, nat := onePortRules(id, proto, ports, backend, rnd)
	jump := strings.Join([]string{"-I", "PREROUTING", "-p", proto, "--dport", strconv.Itoa(int(port)), "-j", ch}, " ")
	for _, tb := range []struct {
		name  string
		rules [][]string
	}{{"mangle", mangle}, {"nat", nat}} {
		if len(tb.rules) == 0 {
			continue
		}
		batch := []string{"-N " + ch} // refused, with the batch, when the chain exists
		for _, r := range tb.rules {
			batch = append(batch, strings.Join(r, " "))
		}
		if err := h.Restore(ctx, hostnet.IPv4, tb.name, append(batch, jump)); err != nil {
			return err
		}
	}
	return nil
}

// deleteChain removes a one-port chain and every jump to it from both
// tables, ignoring what is already gone. Detail is "proto port".
// Equivalent to: iptables -t TABLE -D PREROUTING … -j CH; iptables -t TABLE -F CH; iptables -t TABLE -X CH
func deleteChain(ctx context.Context, h hostnet.Host, r Resource) error {
	f := strings.Fields(r.Detail)
	if len(f) != 2 || !strings.HasPrefix(r.Name, "ovpnperf-") {
		return fmt.Errorf("state: bad iptables chain record %+v", r)
	}
	var errs []error
	for _, table := range []string{"mangle", "nat"} {
		if err := h.RemoveChain(ctx, hostnet.IPv4, table, r.Name); err != nil && !hostnet.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
