package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Link names inside the lab's namespaces. They never appear in the host
// namespace, so they need no lab id; the namespaces carry it.
const (
	clientIf       = "c0" // client's port
	routerClientIf = "rc" // router's port towards the client
	routerServerIf = "rs" // router's port towards the server
	serverIf       = "s0" // server's port
	// The wire namespace's ports (WireBackend): towards the client (the
	// emulator's port A, up = frames arriving on it) and towards the
	// router (port B).
	wireClientIf = "wc"
	wireRouterIf = "wr"
)

// NFQUEUE queue numbers used in the router namespace. Queue numbers are per
// network namespace, so labs never share them.
const (
	queueUp   = 0
	queueDown = 1
)

// Options configure a new lab.
type Options struct {
	// Name is the lab id; empty picks a random one.
	Name string
	Path labpath.Path
	// Ephemeral labs belong to the calling process: if it dies, the lab's
	// owner process tears the lab down. Persistent labs (`ovpnperf lab up`)
	// outlive the command that made them, until `ovpnperf lab down`.
	Ephemeral bool
	// Hosts are added behind the router (AddHost) before Up returns.
	Hosts []Node
	// Env is where the lab keeps its state; the zero value is the host's.
	Env Env
}

// Lab is a running lab.
type Lab struct {
	name  string
	env   Env
	state *stateFile
	owner *exec.Cmd // set in the process that created the lab
	// hostMu makes AddHost one at a time: each takes the next segment.
	hostMu sync.Mutex
}

// Name returns the lab id.
func (l *Lab) Name() string { return l.name }

// Namespace returns the network namespace name of a node.
func (l *Lab) Namespace(n Node) string { return NamespaceName(l.name, n) }

// NamespaceName returns the network namespace name of a node of lab name.
func NamespaceName(name string, n Node) string { return "ovpnperf-" + name + "-" + string(n) }

// Dir returns the lab's private directory (mode 0700), removed by Down.
func (l *Lab) Dir() string { return l.env.Dir(l.name) }

// Path returns the lab's path settings.
func (l *Lab) Path() labpath.Path { return l.state.snapshot().Path }

// Backend returns the emulation backend in use.
func (l *Lab) Backend() string { return l.state.snapshot().Backend }

// BackendWhy says why the lab uses its backend (EmulationChoice).
func (l *Lab) BackendWhy() string { return l.state.snapshot().BackendWhy }

// State returns a copy of the lab's state.
func (l *Lab) State() State { return l.state.snapshot() }

// Command builds a command that runs argv in node through `ip netns exec`.
//
// Every process of a lab runs in one of its namespaces, which its state
// records, so the owner's or `lab clean`'s teardown stops it even if it is
// not listed by pid (pidsInNetns; also when a later mount hides the names).
// The parent-death signal ends it at once when the process that started it
// dies (lab run killed together with the lab's owner left iperf3 -c running
// until lab clean); `ip netns exec` execs the program in place, so the
// signal reaches the program itself. A caller that must outlive its creator
// (the owner) replaces SysProcAttr.
func (l *Lab) Command(ctx context.Context, n Node, argv ...string) *exec.Cmd {
	cmd := runner.InNetns(ctx, l.Namespace(n), argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// Addr returns the address of the client or the server (for the router, its
// address on the client segment) in the given family (4 or 6).
func Addr(n Node, family int) netip.Addr {
	switch {
	case n == Client && family == 6:
		return ClientV6()
	case n == Client:
		return ClientV4()
	case n == Server && family == 6:
		return ServerV6()
	case n == Server:
		return ServerV4()
	case family == 6:
		return RouterClientV6()
	}
	return RouterClientV4()
}

// NewName returns a random lab id.
func NewName() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Preflight checks what every lab needs from the host: root, the programs it
// runs, network namespaces and the tun device.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if err := runner.Require("ip", "iptables-restore", "ip6tables-restore"); err != nil {
		return err
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return errors.New("this kernel has no network namespaces (CONFIG_NET_NS): ovpnperf lab cannot run here")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return errors.New("no /dev/net/tun: load the tun module (modprobe tun) or build the kernel with CONFIG_TUN")
	}
	return nil
}

// Up builds a lab and returns once the owner process holds it. On any error,
// and when ctx is cancelled while it builds, it tears down what it built.
func Up(ctx context.Context, opts Options) (_ *Lab, err error) {
	if err := opts.Path.Validate(); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = NewName()
	}
	if err := ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if err := CheckHostNames("host", opts.Hosts); err != nil {
		return nil, err
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	// Chosen before anything exists: an emulator this host lacks is bad
	// input, and leaves nothing behind.
	backend, why, err := EmulationChoice(opts.Path)
	if err != nil {
		return nil, err
	}
	if ns := NamespacesOf(opts.Name); len(ns) > 0 {
		return nil, usage.Errorf("--name %q: lab name already in use (namespace %s exists); pick another or run `ovpnperf lab down %s`", opts.Name, ns[0], opts.Name)
	}
	env := opts.Env
	if err := os.MkdirAll(env.BaseDir(), 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", env.BaseDir(), err)
	}
	// Mkdir is the lock on the name: it fails if another lab has it.
	if err := os.Mkdir(env.Dir(opts.Name), 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, usage.Errorf("--name %q: lab name already in use; pick another or run `ovpnperf lab down %s`", opts.Name, opts.Name)
		}
		return nil, fmt.Errorf("creating lab directory: %w", err)
	}
	sf, err := newStateFile(env.Dir(opts.Name), State{
		Name: opts.Name, Created: time.Now().UTC(), Path: opts.Path,
		Ephemeral: opts.Ephemeral, Owner: self(), Backend: labpath.BackendNone, BackendWhy: why,
	})
	if err == nil {
		err = sf.record(Resource{Kind: KindDir, Name: env.Dir(opts.Name)})
	}
	if err != nil {
		os.RemoveAll(env.Dir(opts.Name))
		return nil, err
	}
	l := &Lab{name: opts.Name, env: env, state: sf}
	defer func() {
		if err != nil {
			_ = l.teardown()
		}
	}()
	if err := l.build(ctx, opts, backend); err != nil {
		return nil, err
	}
	for _, h := range opts.Hosts {
		if _, err := l.AddHost(ctx, h); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := l.startOwner(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// build creates namespaces, links, addresses, routes, qdiscs and rules.
func (l *Lab) build(ctx context.Context, opts Options, backend string) error {
	p := opts.Path
	nodes := Nodes()
	if WireBackend(backend) {
		nodes = append(nodes, Wire)
	}
	for _, n := range nodes {
		ns := l.Namespace(n)
		if err := l.state.record(Resource{Kind: KindNetns, Name: ns}); err != nil {
			return err
		}
		// Equivalent to: ip netns add NS
		if err := netns.Create(ns); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := l.sysctls(p, nodes); err != nil {
		return err
	}
	mtu := p.EffectiveMTU()
	if WireBackend(backend) {
		// rc ── wr (wire) and wc (wire) ── c0, instead of rc ── c0.
		if err := l.veth(Wire, wireRouterIf, Router, routerClientIf, 1500); err != nil {
			return err
		}
		if err := l.veth(Client, clientIf, Wire, wireClientIf, 1500); err != nil {
			return err
		}
	} else if err := l.veth(Client, clientIf, Router, routerClientIf, 1500); err != nil {
		return err
	}
	if err := l.veth(Server, serverIf, Router, routerServerIf, mtu); err != nil {
		return err
	}
	// With loss, the AF_PACKET wire must see packets, not the 64 KiB GSO
	// aggregates it carries whole otherwise: a lost aggregate would be
	// dozens of lost packets. Software checksums turn segmentation
	// offloads off with them.
	lossy := p.Up.LossPercent > 0 || p.Down.LossPercent > 0
	if backend == labpath.BackendAFXDP || backend == labpath.BackendAFPacket && lossy {
		if err := l.softwareChecksums(); err != nil {
			return err
		}
	}
	type addr struct {
		node   Node
		ifname string
		a      netip.Addr
		bits   int
	}
	addrs := []addr{
		{Client, clientIf, ClientV4(), 24}, {Router, routerClientIf, RouterClientV4(), 24},
		{Router, routerServerIf, RouterServerV4(), 24}, {Server, serverIf, ServerV4(), 24},
	}
	if !p.NoIPv6 {
		addrs = append(addrs,
			addr{Client, clientIf, ClientV6(), 64}, addr{Router, routerClientIf, RouterClientV6(), 64},
			addr{Router, routerServerIf, RouterServerV6(), 64}, addr{Server, serverIf, ServerV6(), 64})
	}
	for _, a := range addrs {
		if err := l.withHandle(a.node, func(h *netlink.Handle) error {
			link, err := h.LinkByName(a.ifname)
			if err != nil {
				return err
			}
			// Equivalent to: ip -n NS addr add A/BITS dev IF nodad
			return h.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(a.a, a.bits), Flags: nodadFlag(a.a)})
		}); err != nil {
			return fmt.Errorf("adding %s to %s in %s: %w", a.a, a.ifname, a.node, err)
		}
	}
	for _, n := range nodes {
		if err := l.withHandle(n, func(h *netlink.Handle) error {
			links, err := h.LinkList()
			if err != nil {
				return err
			}
			for _, link := range links {
				// Equivalent to: ip -n NS link set IF up
				if err := h.LinkSetUp(link); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("setting links up in %s: %w", n, err)
		}
	}
	if WireBackend(backend) {
		if err := l.wireReceive(backend); err != nil {
			return err
		}
	}
	if err := l.neighbours(p); err != nil {
		return err
	}
	routes := []struct {
		node Node
		gw   netip.Addr
	}{{Client, RouterClientV4()}, {Server, RouterServerV4()}}
	if !p.NoIPv6 {
		routes = append(routes, struct {
			node Node
			gw   netip.Addr
		}{Client, RouterClientV6()}, struct {
			node Node
			gw   netip.Addr
		}{Server, RouterServerV6()})
	}
	for _, r := range routes {
		if err := l.withHandle(r.node, func(h *netlink.Handle) error {
			// Equivalent to: ip -n NS route add default via GW
			return h.RouteAdd(&netlink.Route{Gw: net.IP(r.gw.AsSlice()), Family: family(r.gw)})
		}); err != nil {
			return fmt.Errorf("default route in %s via %s: %w", r.node, r.gw, err)
		}
	}
	if err := l.state.update(func(s *State) { s.Backend = backend }); err != nil {
		return err
	}
	if err := l.qdiscs(p, backend); err != nil {
		return err
	}
	return l.rules(ctx, p, backend)
}

// EmulationChoice is the backend a lab of path p uses on this host and why,
// in words for lab status and lab run: the one place that chooses
// (CalibrationBackend asks it too). A path with nothing to emulate uses
// none, whatever p.Emulator asks; auto ("") is netem where the kernel has
// it, else nfqueue: afxdp carried the same lab runs on such a kernel with
// no fewer late releases, and only by changing the client's and router's
// offloads (docs/emulator.md, "Which backend auto chooses"); netem asked
// for on a kernel without it is a usage error.
func EmulationChoice(p labpath.Path) (backend, why string, err error) {
	if err := labpath.CheckEmulatorName(p.Emulator); err != nil {
		return "", "", err
	}
	if !p.Up.Emulated() && !p.Down.Emulated() {
		return labpath.BackendNone, "no delay, jitter or loss to emulate", nil
	}
	switch p.Emulator {
	case "", labpath.EmulatorAuto:
		if NetemAvailable() {
			return labpath.BackendNetem, "auto: the kernel has sch_netem", nil
		}
		return labpath.BackendNFQueue, "auto: the kernel has no sch_netem, so the userspace emulator behind NFQUEUE (docs/emulator.md, \"Which backend auto chooses\")", nil
	case labpath.BackendNetem:
		if !NetemAvailable() {
			return "", "", usage.Errorf("--emulator netem: this kernel has no sch_netem (a netem qdisc could not be added); use auto, nfqueue, afpacket or afxdp")
		}
	}
	return p.Emulator, "--emulator " + p.Emulator + " asked for it", nil
}

// CheckEmulator refuses an emulator name (Path.Emulator, --emulator) that
// names no backend, or one this host lacks (netem without sch_netem), with
// a usage error, before anything is built.
func CheckEmulator(name string) error {
	_, _, err := EmulationChoice(labpath.Path{Up: labpath.Link{Delay: time.Millisecond}, Emulator: name})
	return err
}

// softwareChecksums turns transmit checksum offload off on the two ports
// that send into the AF_XDP wire, c0 and rc: a frame crosses the wire's
// XDP sockets as bytes, without the kernel's note that its checksum is
// still to be filled in, so an offloaded checksum would arrive as a bare
// pseudo-header sum and be dropped. The offloads that depend on it (TSO
// and friends) go with it. The AF_PACKET wire carries that note
// (PACKET_VNET_HDR) and needs it only on a lossy path, where it must see
// each packet rather than GSO aggregates
// (docs/measurements.md#loss-on-the-af_packet-wire).
//
// Equivalent to: ip netns exec NS ethtool -K IF tx off
func (l *Lab) softwareChecksums() error {
	for _, e := range []struct {
		node   Node
		ifname string
	}{{Client, clientIf}, {Router, routerClientIf}} {
		if err := l.setFeatures(e.node, e.ifname, map[string]bool{"tx-checksum-ip-generic": false}); err != nil {
			return err
		}
	}
	return nil
}

// setFeatures changes offload features of a node's interface (ethtool -K).
func (l *Lab) setFeatures(node Node, ifname string, features map[string]bool) error {
	err := netns.Do(l.Namespace(node), func() error {
		et, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer et.Close()
		if err := et.Change(ifname, features); err != nil {
			return fmt.Errorf("setting %v on %s: %w", features, ifname, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	return nil
}

// wireReceive has the two ports the wire sends into, rc (up) and c0
// (down), receive in their own NAPI thread with GRO. Without it the kernel
// runs the peer's whole receive (the router's forwarding and tbf, or the
// client's TCP) inside the emulator's send, frame by frame, on its
// real-time thread, and releases come late
// (docs/measurements.md#late-releases-on-the-wire).
//
// A veth hands a frame to its peer's NAPI only when the sending port could
// not have segmented it itself, or when the frame comes from a local
// socket and the peer forwards UDP GRO (Linux drivers/net/veth.c,
// veth_skb_is_eligible_for_gro). AF_XDP's copy-mode frames belong to no
// socket, so for afxdp the wire ports get TSO off. AF_PACKET's do (the
// sending socket owns them), so for afpacket rc and c0 get UDP GRO
// forwarding instead and the wire ports keep TSO, which lets GSO
// aggregates cross whole.
//
// Equivalent to (afxdp; afpacket instead: ethtool -K IF gro on
// rx-udp-gro-forwarding on on c0 and rc, and the wire ports unchanged):
//
//	ip netns exec W ethtool -K wc tso off; ip netns exec W ethtool -K wr tso off
//	ip netns exec C ethtool -K c0 gro on; echo 1 > /sys/class/net/c0/threaded
//	ip netns exec R ethtool -K rc gro on; echo 1 > /sys/class/net/rc/threaded
func (l *Lab) wireReceive(backend string) error {
	type port struct {
		node     Node
		ifname   string
		features map[string]bool
		threaded bool
	}
	var ports []port
	if backend == labpath.BackendAFXDP {
		tso := map[string]bool{"tx-tcp-segmentation": false, "tx-tcp6-segmentation": false,
			"tx-tcp-ecn-segmentation": false, "tx-tcp-mangleid-segmentation": false}
		gro := map[string]bool{"rx-gro": true}
		ports = []port{
			{Wire, wireClientIf, tso, false}, {Wire, wireRouterIf, tso, false},
			{Client, clientIf, gro, true}, {Router, routerClientIf, gro, true},
		}
	} else {
		gro := map[string]bool{"rx-gro": true, "rx-udp-gro-forwarding": true}
		ports = []port{{Client, clientIf, gro, true}, {Router, routerClientIf, gro, true}}
	}
	for _, e := range ports {
		if err := l.setFeatures(e.node, e.ifname, e.features); err != nil {
			return err
		}
		if e.threaded {
			if err := netns.WriteSys(l.Namespace(e.node), "class/net/"+e.ifname+"/threaded", "1"); err != nil {
				return fmt.Errorf("%s: %w", e.node, err)
			}
		}
	}
	return nil
}

// neighbours installs permanent neighbour entries on both ends of each
// segment, so that no measurement waits for address resolution. On fresh
// veths the first IPv6 neighbour solicitation went unanswered until the
// 1 s retransmit, which added a second to the first packet of every lab.
//
// Equivalent to: ip -n NS neigh add ADDR lladdr MAC dev IF nud permanent
func (l *Lab) neighbours(p labpath.Path) error {
	mac := func(n Node, ifname string) (net.HardwareAddr, error) {
		var hw net.HardwareAddr
		err := l.withHandle(n, func(h *netlink.Handle) error {
			link, err := h.LinkByName(ifname)
			if err != nil {
				return err
			}
			hw = link.Attrs().HardwareAddr
			return nil
		})
		return hw, err
	}
	type entry struct {
		node     Node
		ifname   string
		addrs    []netip.Addr
		peerNode Node
		peerIf   string
	}
	entries := []entry{
		{Client, clientIf, []netip.Addr{RouterClientV4(), RouterClientV6()}, Router, routerClientIf},
		{Router, routerClientIf, []netip.Addr{ClientV4(), ClientV6()}, Client, clientIf},
		{Router, routerServerIf, []netip.Addr{ServerV4(), ServerV6()}, Server, serverIf},
		{Server, serverIf, []netip.Addr{RouterServerV4(), RouterServerV6()}, Router, routerServerIf},
	}
	for _, e := range entries {
		hw, err := mac(e.peerNode, e.peerIf)
		if err != nil {
			return err
		}
		err = l.withHandle(e.node, func(h *netlink.Handle) error {
			link, err := h.LinkByName(e.ifname)
			if err != nil {
				return err
			}
			for _, a := range e.addrs {
				if a.Is6() && p.NoIPv6 {
					continue
				}
				if err := h.NeighAdd(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family(a), State: netlink.NUD_PERMANENT,
					IP: net.IP(a.AsSlice()), HardwareAddr: hw}); err != nil {
					return fmt.Errorf("neighbour %s on %s: %w", a, e.ifname, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", e.node, err)
		}
	}
	return nil
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func prefixNet(a netip.Addr, bits int) *net.IPNet {
	size := 32
	if a.Is6() {
		size = 128
	}
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, size)}
}

// nodadFlag skips IPv6 duplicate address detection, so addresses are usable
// at once (nothing else is on these links).
func nodadFlag(a netip.Addr) int {
	if a.Is6() {
		return 0x02 // IFA_F_NODAD
	}
	return 0
}

func (l *Lab) withHandle(n Node, fn func(h *netlink.Handle) error) error {
	h, err := netns.Handle(l.Namespace(n))
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

// sysctls turns on forwarding in the router and quiets IPv6 autoconfiguration.
// The wire namespace gets IPv6 off before its ports exist (no link-local
// address) and forwarding off: the emulator's Open refuses it otherwise.
func (l *Lab) sysctls(p labpath.Path, nodes []Node) error {
	for _, n := range nodes {
		set := map[string]string{
			"net/ipv6/conf/all/accept_dad":     "0",
			"net/ipv6/conf/default/accept_dad": "0",
			"net/ipv6/conf/all/accept_ra":      "0",
			"net/ipv6/conf/default/accept_ra":  "0",
		}
		if p.NoIPv6 {
			set["net/ipv6/conf/all/disable_ipv6"] = "1"
			set["net/ipv6/conf/default/disable_ipv6"] = "1"
		}
		if n == Wire {
			set = map[string]string{
				"net/ipv6/conf/all/disable_ipv6":     "1",
				"net/ipv6/conf/default/disable_ipv6": "1",
				"net/ipv4/ip_forward":                "0",
			}
		}
		if n == Router {
			set["net/ipv4/ip_forward"] = "1"
			if !p.NoIPv6 {
				set["net/ipv6/conf/all/forwarding"] = "1"
			}
		}
		h := hostnet.Open(l.Namespace(n))
		for k, v := range set {
			// Equivalent to: ip netns exec NS sysctl -w KEY=VALUE
			if _, err := h.SetSysctl(context.Background(), strings.ReplaceAll(k, "/", "."), v); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	return nil
}

// veth creates a veth pair with one end (name) in node and the other (peer)
// in peerNode; both ends get the given MTU.
//
// Equivalent to: ip -n PEERNODE link add PEER mtu M type veth peer name NAME netns NODE mtu M
func (l *Lab) veth(node Node, name string, peerNode Node, peer string, mtu int) error {
	if err := l.state.record(Resource{Kind: KindLink, Name: peer + "/" + name, Netns: l.Namespace(peerNode), Detail: "veth to " + l.Namespace(node)}); err != nil {
		return err
	}
	nodeNs, err := netns.Fd(l.Namespace(node))
	if err != nil {
		return err
	}
	defer nodeNs.Close()
	return l.withHandle(peerNode, func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = peer
		la.MTU = mtu
		v := &netlink.Veth{LinkAttrs: la, PeerName: name, PeerMTU: uint32(mtu), PeerNamespace: netlink.NsFd(int(nodeNs))}
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("creating veth %s–%s: %w", peer, name, err)
		}
		return nil
	})
}

// teardown removes what the state lists, newest first. Links, qdiscs and
// rules live inside the lab's namespaces and go with them. A resource that
// is already gone is not an error. The calling process is never killed.
func (l *Lab) teardown() error {
	st := l.state.snapshot()
	l.state.close()
	return l.env.teardownState(st)
}

// teardownState undoes st's journal entries, newest first, that are the
// lab's own: namespaces named as the lab names its own (ovpnperf-NAME-NODE),
// after stopping what runs in them, and processes whose pid, start time and
// command line are the ones recorded. A state file is trusted for nothing
// else: one that names another namespace, or a process that is not the
// one it started (pid 1, another lab's), is damaged or forged, and what it
// names is left alone and reported.
func (e Env) teardownState(st State) error {
	if err := ValidateName(st.Name); err != nil {
		return fmt.Errorf("state file names lab %q; nothing removed", st.Name)
	}
	r := journal.Undo(context.Background(), st.Resources, undoActions(st))
	errs := r.Errs
	if len(errs) == 0 {
		// What the lab made is gone; what a damaged state file names
		// besides is not the lab's and keeps no directory alive.
		if err := os.RemoveAll(e.Dir(st.Name)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(r.Foreign) > 0 {
		errs = append(errs, fmt.Errorf("its state file lists what the lab did not make, left alone: %s", strings.Join(r.Foreign, "; ")))
	}
	return errors.Join(errs...)
}

// undoActions are the actions that undo lab st's entries. Links, qdiscs,
// rules and the emulator live in the lab's namespaces and go with them;
// the directory goes last, once the rest is undone.
func undoActions(st State) map[string]journal.Action {
	o := newOwnership(st)
	procs := journal.Processes{
		Terminate: func(pid int, ticks uint64) { runner.Terminate(pid, ticks, 2*time.Second) },
		Legacy:    o.legacy,
		Skip:      func(e Resource) bool { return e.Pid == o.me },
	}
	return map[string]journal.Action{
		KindProcess: procs.Undo,
		KindNetns: func(_ context.Context, e Resource) error {
			if why := journal.NamespaceOwned("ovpnperf-"+st.Name+"-", e.Name); why != "" || !ownNamespace(st.Name, e.Name) {
				return journal.Foreign("namespace %q", e.Name)
			}
			// Anything still running in it was started in it by
			// ovpnperf (lab exec, or a child of a recorded process); a
			// namespace with processes in it outlives its name.
			for _, pid := range pidsInNetns(e.Name) {
				if pid == o.me {
					continue
				}
				if t, err := startTicks(pid); err == nil {
					runner.Terminate(pid, t, time.Second)
				}
			}
			// Equivalent to: ip netns del NS
			return netns.Delete(e.Name)
		},
		KindDir: journal.Nothing, KindLink: journal.Nothing, KindQdisc: journal.Nothing,
		KindIptables: journal.Nothing, KindEmulation: journal.Nothing,
	}
}

// ownership tells a lab's own processes from the others in a state file
// an earlier version wrote, which recorded no command line: such a process
// is the lab's while it runs in one of the lab's namespaces (every process
// a lab starts, its owner too, is started in one with `ip netns exec`).
type ownership struct {
	me     int
	inodes map[uint64]bool // the lab's namespaces, as in /proc/PID/ns/net
}

func newOwnership(st State) *ownership {
	o := &ownership{me: os.Getpid(), inodes: map[uint64]bool{}}
	for _, r := range st.Resources {
		if r.Kind == KindNetns && ownNamespace(st.Name, r.Name) {
			if ino, ok := netns.Inode(r.Name); ok {
				o.inodes[ino] = true
			}
		}
	}
	return o
}

// legacy says why process e (recorded without its command line) is not
// the lab's: "" when it runs in one of the lab's namespaces.
func (o *ownership) legacy(e Resource, _ journal.Process) string {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", e.Pid), &st); err != nil || !o.inodes[st.Ino] {
		return fmt.Sprintf("process %d (%q), which runs outside the lab's namespaces", e.Pid, e.Name)
	}
	return ""
}
