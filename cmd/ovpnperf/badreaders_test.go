package main

import (
	"bytes"
	"context"
	byteorder "encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// The captures below are written byte by byte, as a damaged or hostile
// file would be: the reader must not trust any length in them.

// ipv4UDP is an IPv4 packet (no options) carrying a UDP datagram of
// payload bytes from port 1194 to 1194.
func ipv4UDP(payload int) []byte {
	p := make([]byte, 28+payload)
	p[0], p[8], p[9] = 0x45, 64, 17
	byteorder.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:], []byte{192, 0, 2, 1, 198, 51, 100, 1})
	byteorder.BigEndian.PutUint16(p[20:], 1194)
	byteorder.BigEndian.PutUint16(p[22:], 1194)
	byteorder.BigEndian.PutUint16(p[24:], uint16(8+payload))
	return p
}

// ether is an Ethernet frame around an IPv4 packet.
func ether(ip []byte) []byte {
	return append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}, ip...)
}

// sll is a Linux cooked-capture (v1) frame around an IPv4 packet.
func sll(ip []byte) []byte {
	return append([]byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00}, ip...)
}

// pcapFile is a little-endian pcap header of snaplen and linktype.
func pcapFile(snaplen, linktype uint32) []byte {
	b := make([]byte, 24)
	byteorder.LittleEndian.PutUint32(b, 0xa1b2c3d4)
	byteorder.LittleEndian.PutUint16(b[4:], 2)
	byteorder.LittleEndian.PutUint16(b[6:], 4)
	byteorder.LittleEndian.PutUint32(b[16:], snaplen)
	byteorder.LittleEndian.PutUint32(b[20:], linktype)
	return b
}

// pcapRecord is a record header claiming caplen of origlen bytes,
// followed by data (which may be shorter than claimed).
func pcapRecord(caplen, origlen uint32, data []byte) []byte {
	b := make([]byte, 16)
	byteorder.LittleEndian.PutUint32(b[8:], caplen)
	byteorder.LittleEndian.PutUint32(b[12:], origlen)
	return append(b, data...)
}

// ngBlock is a little-endian pcapng block: type, length, body padded to 4
// bytes, length.
func ngBlock(typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	b := byteorder.LittleEndian.AppendUint32(nil, typ)
	b = byteorder.LittleEndian.AppendUint32(b, n)
	b = append(b, body...)
	return byteorder.LittleEndian.AppendUint32(b, n)
}

// ngSection is a section header block (version 1.0, length unknown).
func ngSection() []byte {
	body := byteorder.LittleEndian.AppendUint32(nil, 0x1a2b3c4d)
	body = byteorder.LittleEndian.AppendUint16(body, 1)
	body = byteorder.LittleEndian.AppendUint16(body, 0)
	body = byteorder.LittleEndian.AppendUint64(body, ^uint64(0))
	return ngBlock(0x0a0d0d0a, body)
}

// ngIface is an interface description block.
func ngIface(linktype uint16, snaplen uint32) []byte {
	body := byteorder.LittleEndian.AppendUint16(nil, linktype)
	body = byteorder.LittleEndian.AppendUint16(body, 0)
	body = byteorder.LittleEndian.AppendUint32(body, snaplen)
	return ngBlock(1, body)
}

// ngPacket is an enhanced packet block of interface id.
func ngPacket(id, caplen, origlen uint32, data []byte) []byte {
	body := byteorder.LittleEndian.AppendUint32(nil, id)
	body = byteorder.LittleEndian.AppendUint64(body, 0)
	body = byteorder.LittleEndian.AppendUint32(body, caplen)
	body = byteorder.LittleEndian.AppendUint32(body, origlen)
	return ngBlock(6, append(body, data...))
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// badTrailer is block with a trailing length that is not its leading one.
func badTrailer(block []byte) []byte {
	b := append([]byte(nil), block...)
	b[len(b)-4]++
	return b
}

// Damaged captures and captures that claim more than any capture holds
// are refused by analyze with exit status 2 and one line, quickly and in
// little memory: a 40-byte file claiming a 4 GiB record, and a sparse
// 2 GiB file whose one record claims 2 GiB (it ran out of memory after
// 36 s), among them. A file cut right after a record header, or an
// interface the file does not describe, is no longer read as a clean end
// or a lost packet.
//
// Not parallel: a child's peak memory (ru_maxrss) includes the test
// binary's own peak when the child was started (Go starts children sharing
// its memory until exec), and tests running beside this one raise that.
func TestAnalyzeRefusesDamagedCaptures(t *testing.T) {
	dir := t.TempDir()
	in := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pkt := ether(ipv4UDP(100))
	n := uint32(len(pkt))
	good := join(pcapFile(65535, 1), pcapRecord(n, n, pkt))
	ngHead := join(ngSection(), ngIface(1, 65535))
	// The sparse 2 GiB capture: a header of snaplen 0xffffffff, one record
	// claiming 2 GiB - 40 bytes, and holes (no disk used).
	sparse := filepath.Join(dir, "sparse-2g.pcap")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(join(pcapFile(0xffffffff, 1), pcapRecord(2<<30-40, 2<<30-40, nil)))
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cases := []struct {
		name string
		file string
		want string
	}{
		// Lengths past libpcap's maximum, whatever the snap length says.
		{"4 GiB record", in("huge-record.pcap", join(pcapFile(0xffffffff, 1), pcapRecord(0xffffffff, 0xffffffff, nil))), "262144"},
		{"2 GiB record, snaplen 0", in("snap0.pcap", join(pcapFile(0, 1), pcapRecord(1<<31, 1<<31, nil))), "262144"},
		{"262145-byte record", in("max1.pcap", join(pcapFile(0xffffffff, 1), pcapRecord(262145, 262145, make([]byte, 100)))), "262144"},
		{"2 GiB sparse file", sparse, "262144"},
		{"big-endian 4 GiB record", in("be.pcap", append([]byte{0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}, bytes.Repeat([]byte{0xff}, 16)...)), "262144"},
		{"pcapng 4 GiB block", in("ng-huge.pcapng", join(ngHead, []byte{6, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff})), "claims"},
		{"pcapng 4 GiB record", in("ng-huge-rec.pcapng", join(ngHead, ngPacket(0, 0xffffffff, 0xffffffff, pkt))), "262144"},
		// Records that contradict themselves or their header.
		{"caplen > len", in("caplen-len.pcap", join(pcapFile(65535, 1), pcapRecord(n, n-10, pkt))), "captured bytes of a"},
		{"caplen > snaplen", in("caplen-snap.pcap", join(pcapFile(64, 1), pcapRecord(n, n, pkt))), "snap length 64"},
		{"link type 65537", in("lt65537.pcap", join(pcapFile(65535, 65537), pcapRecord(n, n, pkt))), "link type field 65537"},
		{"pcapng caplen > len", in("ng-caplen-len.pcapng", join(ngHead, ngPacket(0, n, n-1, pkt))), "captured bytes of a"},
		{"pcapng caplen > snaplen", in("ng-caplen-snap.pcapng", join(ngSection(), ngIface(1, 64), ngPacket(0, n, n, pkt))), "snap length 64"},
		{"pcapng caplen > block", in("ng-caplen-block.pcapng", join(ngHead, ngPacket(0, 1000, 1000, pkt))), "in a block of"},
		{"pcapng bad interface id", in("ng-iface.pcapng", join(ngHead, ngPacket(1, n, n, pkt))), "interface 1"},
		{"pcapng packet before any interface", in("ng-noiface.pcapng", join(ngSection(), ngPacket(0, n, n, pkt))), "interface 0"},
		{"pcapng second section", in("ng-2sect.pcapng", join(ngHead, ngPacket(0, n, n, pkt), ngSection(), ngIface(1, 65535), ngPacket(0, n, n, pkt))), "second section"},
		{"pcapng lengths differ", in("ng-trail.pcapng", join(ngHead, badTrailer(ngPacket(0, n, n, pkt)))), "at its end"},
		{"pcapng skipped block's lengths differ", in("ng-trail-skip.pcapng", join(ngHead, badTrailer(ngBlock(4, make([]byte, 8))))), "at its end"},
		{"pcapng odd block length", in("ng-odd.pcapng", join(ngHead, []byte{6, 0, 0, 0, 13, 0, 0, 0})), "length of 13"},
		// Files that end inside a packet.
		{"cut after a record header", in("cut-hdr.pcap", join(good, pcapRecord(n, n, nil))), "truncated"},
		{"cut inside a record header", in("cut-in-hdr.pcap", join(good, pcapRecord(n, n, nil)[:9])), "truncated"},
		{"cut inside a record", in("cut-data.pcap", join(good, pcapRecord(n, n, pkt[:50]))), "truncated"},
		{"cut inside the file header", in("cut-file.pcap", good[:20]), "truncated"},
		{"pcapng cut after a block header", in("ng-cut-hdr.pcapng", join(ngHead, ngPacket(0, n, n, pkt)[:8])), "truncated"},
		{"pcapng cut inside a block", in("ng-cut.pcapng", join(ngHead, ngPacket(0, n, n, pkt)[:40])), "truncated"},
		{"pcapng cut inside the section header", in("ng-cut-shb.pcapng", ngSection()[:20]), "truncated"},
	}
	before := listTree(t, dir)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, cpu, rss := runMeasured(t, 10*time.Second, "analyze", c.file, "--port", "1194")
			r.mustBeUsageError(t, c.want)
			if cpu >= 2*time.Second {
				t.Errorf("used %v of CPU, want under 2 s", cpu)
			}
			// The Go runtime and the binary's code take some 20-40 MB.
			if rss > 128<<20 {
				t.Errorf("peak memory %d MiB, want under 128 MiB", rss>>20)
			}
		})
	}
	if after := listTree(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("files changed: before %v, after %v", before, after)
	}
}

// runMeasured runs the binary as runLimited does (killed and failed past
// limit) and also returns its peak resident memory.
func runMeasured(t *testing.T, limit time.Duration, args ...string) (result, time.Duration, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := runner.Command(ctx, append([]string{binary}, args...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var took time.Duration
	var rss int64
	if ps := cmd.ProcessState; ps != nil {
		took = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss << 10 // KiB on Linux
		}
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ovpnperf %s: still running after %v (stderr %q)", strings.Join(args, " "), limit, se.String())
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running ovpnperf %s: %v", strings.Join(args, " "), err)
	}
	return r, took, rss
}

// analyzeJSON runs analyze --json on b and decodes the document.
func analyzeJSON(t *testing.T, b []byte, args ...string) map[string]any {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.pcap")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := ovpnperf(t, append([]string{"analyze", p, "--json"}, args...)...).mustSucceed(t)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return doc
}

// A pcapng capture of interfaces with different link types is read whole,
// each packet with its own interface's link type, and says so; pcap and
// pcapng records of every kind the formats have are counted.
func TestAnalyzeReadsEveryPacket(t *testing.T) {
	t.Parallel()
	eth, cooked := ether(ipv4UDP(100)), sll(ipv4UDP(200))
	ne, nc := uint32(len(eth)), uint32(len(cooked))
	simple := byteorder.LittleEndian.AppendUint32(nil, ne)
	obsolete := byteorder.LittleEndian.AppendUint16(nil, 0)
	obsolete = byteorder.LittleEndian.AppendUint16(obsolete, 0)
	obsolete = byteorder.LittleEndian.AppendUint64(obsolete, 0)
	obsolete = byteorder.LittleEndian.AppendUint32(obsolete, ne)
	obsolete = byteorder.LittleEndian.AppendUint32(obsolete, ne)
	for _, c := range []struct {
		name     string
		file     []byte
		packets  float64
		linkType string
	}{
		{"two link types", join(ngSection(), ngIface(1, 65535), ngIface(113, 65535),
			ngPacket(0, ne, ne, eth), ngPacket(1, nc, nc, cooked), ngPacket(0, ne, ne, eth)), 3, "Ethernet, Linux SLL"},
		{"simple, obsolete and enhanced blocks, skipped blocks between", join(ngSection(), ngIface(1, 0),
			ngBlock(3, append(simple, eth...)), ngBlock(4, make([]byte, 12)), ngBlock(2, append(obsolete, eth...)), ngBlock(5, make([]byte, 12)), ngPacket(0, ne, ne, eth)), 3, "Ethernet"},
		{"pcap snaplen 0xffffffff", join(pcapFile(0xffffffff, 1), pcapRecord(ne, ne, eth), pcapRecord(ne, ne, eth)), 2, "Ethernet"},
		{"pcap with an FCS length", join(pcapFile(65535, 1|0x24000000), pcapRecord(ne, ne, eth)), 1, "Ethernet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := analyzeJSON(t, c.file, "--port", "1194")
			if doc["packets"] != c.packets || doc["ip_packets"] != c.packets || doc["datagrams"] != c.packets || doc["link_type"] != c.linkType {
				t.Errorf("packets %v, IP %v, datagrams %v, link type %v; want %v packets of %q", doc["packets"], doc["ip_packets"], doc["datagrams"], doc["link_type"], c.packets, c.linkType)
			}
		})
	}
}

// IPv6 jumbograms (RFC 2675: payload length 0, the length in a hop-by-hop
// option) are counted at their length, in a histogram bar of their own.
func TestAnalyzeJumbogram(t *testing.T) {
	t.Parallel()
	const payload = 70000 // hop-by-hop header (8) + UDP header (8) + data
	ip := make([]byte, 40+8+8+64)
	ip[0], ip[6], ip[7] = 0x60, 0, 64 // next header: hop-by-hop
	ip[8+15], ip[24+15] = 1, 2        // ::1 → ::2
	hbh := ip[40:48]
	hbh[0], hbh[1] = 17, 0 // next: UDP; 8 bytes
	hbh[2], hbh[3] = 0xc2, 4
	byteorder.BigEndian.PutUint32(hbh[4:], payload)
	byteorder.BigEndian.PutUint16(ip[48:], 1194)
	byteorder.BigEndian.PutUint16(ip[50:], 1194)
	frame := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd}, ip...)
	n := uint32(len(frame))
	doc := analyzeJSON(t, join(pcapFile(65535, 1), pcapRecord(n, 14+40+payload, frame)), "--port", "1194")
	if doc["max_ip_bytes"] != float64(40+payload) || doc["ip_bytes"] != float64(40+payload) {
		t.Errorf("largest %v bytes, IP bytes %v; want %d", doc["max_ip_bytes"], doc["ip_bytes"], 40+payload)
	}
	h, _ := doc["histogram"].([]any)
	if len(h) != 1 {
		t.Fatalf("histogram %v, want one bar", doc["histogram"])
	}
	bar := h[0].(map[string]any)
	if bar["lo_bytes"] != float64(65536) || bar["packets"] != float64(1) {
		t.Errorf("histogram %v, want the jumbogram in the bar from 65536 bytes", h)
	}
	if doc["datagrams"] != float64(1) {
		t.Errorf("%v datagrams of port 1194, want 1 (UDP after the hop-by-hop header)", doc["datagrams"])
	}
}

// An IPv4 packet whose total length is 0 is a segmentation-offload
// super-packet captured on its sender: it counts at the length the record
// gives (after the link header), not at the bytes captured of it (128
// with tcpdump -s 128).
func TestAnalyzeOffloadLength(t *testing.T) {
	t.Parallel()
	frame := ether(ipv4UDP(200))[:128]
	frame[14+2], frame[14+3] = 0, 0
	doc := analyzeJSON(t, join(pcapFile(128, 1), pcapRecord(128, 14+30000, frame)))
	if doc["max_ip_bytes"] != float64(30000) || doc["ip_bytes"] != float64(30000) {
		t.Errorf("largest %v bytes, IP bytes %v; want 30000", doc["max_ip_bytes"], doc["ip_bytes"])
	}
}
