package emulate

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// stampBytes is the metadata the XDP program writes in front of each frame:
// its receive time, CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns). The
// socket copies it into the UMEM with the frame, right before it.
const stampBytes = 8

// xdpReturnDrop is XDP_DROP: bpf_redirect_map's action when the XSKMAP has
// no socket for the frame's receive queue (the low bits of its flags).
const xdpReturnDrop = 1

// xdp_md field offsets (include/uapi/linux/bpf.h).
const (
	xdpMdData         = 0
	xdpMdDataMeta     = 8
	xdpMdRxQueueIndex = 16
	xskMapEntries     = 1 // veth ports have one receive queue
	xdpProgramLicense = "Dual MIT/GPL"
	xdpProgramName    = "ovpnperf_wire"
	xskMapName        = "ovpnperf_xsks"
	labelRedirect     = "redirect"
)

// wireProgram is the XDP program of one wire port: every frame (IP, ARP,
// anything) gets its receive time as metadata and goes to the AF_XDP socket
// of its receive queue; without a socket there it is dropped, never passed
// to the stack. In C:
//
//	int prog(struct xdp_md *ctx) {
//		if (bpf_xdp_adjust_meta(ctx, -8) == 0) {
//			__u64 *meta = (void *)(long)ctx->data_meta;
//			if ((void *)(meta + 1) <= (void *)(long)ctx->data)
//				*meta = bpf_ktime_get_ns();
//		}
//		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP);
//	}
func wireProgram(xsks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R2, -stampBytes),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, labelRedirect),
		asm.LoadMem(asm.R7, asm.R6, xdpMdDataMeta, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, xdpMdData, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, stampBytes),
		asm.JGT.Reg(asm.R2, asm.R8, labelRedirect),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R7, 0, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, xsks.FD()).WithSymbol(labelRedirect),
		asm.LoadMem(asm.R2, asm.R6, xdpMdRxQueueIndex, asm.Word),
		asm.Mov.Imm(asm.R3, xdpReturnDrop),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// xdpPort is the XDP side of one wire port: the XSKMAP, the program and
// its attachment (a BPF link: it ends with the last file descriptor, so a
// process that dies leaves no program behind).
type xdpPort struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	link link.Link
	mode string
}

// newXDPPort loads the map and the program; attach hooks it to the port.
func newXDPPort() (*xdpPort, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       xskMapName,
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: xskMapEntries,
	})
	if err != nil {
		return nil, fmt.Errorf("creating XSKMAP: %w (the kernel needs CONFIG_BPF_SYSCALL and CONFIG_XDP_SOCKETS, and the process CAP_BPF or CAP_SYS_ADMIN)", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         xdpProgramName,
		Type:         ebpf.XDP,
		License:      xdpProgramLicense,
		Instructions: wireProgram(xsks),
	})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("loading the XDP program: %w", err)
	}
	return &xdpPort{xsks: xsks, prog: prog}, nil
}

// register puts the socket fd into the XSKMAP at queue 0.
func (p *xdpPort) register(fd int) error {
	if err := p.xsks.Update(uint32(0), uint32(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("adding the AF_XDP socket to the XSKMAP: %w", err)
	}
	return nil
}

// attach hooks the program to the port: in the driver (native) unless
// mode says generic, else in the stack's receive path (generic) when the
// driver refuses.
//
// Equivalent to: ip link set dev PORT xdpdrv (or xdpgeneric) pinned PROG
func (p *xdpPort) attach(ifindex int, dev, mode string) error {
	var errs []error
	for _, m := range []struct {
		name  string
		flags link.XDPAttachFlags
	}{{XDPModeNative, link.XDPDriverMode}, {XDPModeGeneric, link.XDPGenericMode}} {
		if mode != "" && mode != m.name {
			continue
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: m.flags})
		if err == nil {
			p.link, p.mode = l, m.name
			return nil
		}
		errs = append(errs, fmt.Errorf("%s mode: %w", m.name, err))
	}
	return fmt.Errorf("attaching the XDP program to %s: %w (the kernel needs CONFIG_XDP_SOCKETS and BPF links for XDP, Linux 5.9 or later)", dev, errors.Join(errs...))
}

func (p *xdpPort) close() error {
	var errs []error
	if p.link != nil {
		errs = append(errs, p.link.Close())
	}
	errs = append(errs, p.prog.Close(), p.xsks.Close())
	return errors.Join(errs...)
}
