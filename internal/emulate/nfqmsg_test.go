package emulate

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// The netlink headers are in host byte order; the golden bytes below are
// for little-endian hosts (amd64, arm64).
func requireLittleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		testenv.SkipOrFail(t, "golden bytes are little-endian")
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendVerdictGolden(t *testing.T) {
	requireLittleEndian(t)
	for _, tc := range []struct {
		name    string
		batch   bool
		verdict uint32
		want    string
	}{
		{"batch accept", true, nfAccept, `
			20000000 0303 0100 04030201 00000000  nlmsghdr: len 32, NFQNL_MSG_VERDICT_BATCH, NLM_F_REQUEST, seq, portid 0
			00 00 0102                             nfgenmsg: AF_UNSPEC, v0, queue 0x0102 big-endian
			0c00 0200 00000001 a0b0c0d0            NFQA_VERDICT_HDR: NF_ACCEPT, id`},
		{"single drop", false, nfDrop, `
			20000000 0103 0100 04030201 00000000
			00 00 0102
			0c00 0200 00000000 a0b0c0d0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := appendVerdict(nil, 0x0102, 0x01020304, tc.batch, tc.verdict, 0xa0b0c0d0)
			want := unhex(t, stripComments(tc.want))
			if !bytes.Equal(got, want) {
				t.Errorf("got\n%x\nwant\n%x", got, want)
			}
			if len(got) != verdictMsgLen {
				t.Errorf("length %d, verdictMsgLen %d", len(got), verdictMsgLen)
			}
		})
	}
}

// stripComments drops everything after two spaces of text on each line, so
// golden hex can carry explanations.
func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "  "); i >= 0 {
			line = line[:i]
		}
		out = append(out, line)
	}
	return strings.Join(out, " ")
}

func TestAppendBindGolden(t *testing.T) {
	requireLittleEndian(t)
	got := appendBind(nil, 0x0102, 5, queueParams{CopyRange: 1, MaxLen: 65536, GSO: true})
	want := unhex(t, stripComments(`
		40000000 0203 0500 05000000 00000000  nlmsghdr: len 64, NFQNL_MSG_CONFIG, REQUEST|ACK, seq 5
		00 00 0102                            nfgenmsg
		0800 0100 01 00 0000                  NFQA_CFG_CMD: BIND, pad, pf 0
		0900 0200 00000001 02 000000          NFQA_CFG_PARAMS (len 9): range 1, COPY_PACKET, padding
		0800 0300 00010000                    NFQA_CFG_QUEUE_MAXLEN 65536
		0800 0400 0000001f                    NFQA_CFG_MASK: all five flags
		0800 0500 00000004                    NFQA_CFG_FLAGS: GSO only, never FAIL_OPEN`))
	if !bytes.Equal(got, want) {
		t.Errorf("got\n%x\nwant\n%x", got, want)
	}
	noGSO := appendBind(nil, 0x0102, 5, queueParams{CopyRange: 1, MaxLen: 65536})
	if f := binary.BigEndian.Uint32(noGSO[len(noGSO)-4:]); f != 0 {
		t.Errorf("flags without GSO = %#x, want 0", f)
	}
}

func TestAppendUnbindGolden(t *testing.T) {
	t.Parallel()
	requireLittleEndian(t)
	got := appendUnbind(nil, 3, 9)
	want := unhex(t, stripComments(`
		1c000000 0203 0500 09000000 00000000
		00 00 0003
		0800 0100 02 00 0000  NFQA_CFG_CMD: UNBIND`))
	if !bytes.Equal(got, want) {
		t.Errorf("got\n%x\nwant\n%x", got, want)
	}
}

// TestParseCapturedPacket decodes a packet message captured from Linux 6.18
// by TestKernelMessages -update: a forwarded 128-byte IPv4 ping on queue 0,
// copy range 1 (so the kernel adds NFQA_CAP_LEN).
func TestParseCapturedPacket(t *testing.T) {
	t.Parallel()
	requireLittleEndian(t)
	raw, err := os.ReadFile("testdata/packet-ipv4-ping.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, rest, err := nextMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 || m.Type != nfqType(nfqnlMsgPacket) {
		t.Fatalf("type %#x, %d bytes left", m.Type, len(rest))
	}
	p, err := parsePacket(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	want := packetInfo{Queue: 0, ID: 1, HWProtocol: 0x0800, Hook: 2, Len: 128}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	// Every cut of the datagram either parses to the same id or fails; it
	// never panics or invents another id.
	for i := range raw {
		m, _, err := nextMessage(raw[:i])
		if err != nil {
			continue
		}
		if p, err := parsePacket(m.Payload); err == nil && p.ID != 1 {
			t.Errorf("cut at %d: id %d", i, p.ID)
		}
	}
}

// TestParseStampedPacket decodes a packet message captured with receive
// stamps on: NFQA_TIMESTAMP is 16 bytes of big-endian seconds and
// microseconds.
func TestParseStampedPacket(t *testing.T) {
	requireLittleEndian(t)
	raw, err := os.ReadFile("testdata/packet-ipv4-ping-stamped.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := nextMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parsePacket(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	// Find the attribute by hand to check the decoding.
	i := bytes.Index(raw, []byte{20, 0, nfqaTimestamp, 0})
	if i < 0 {
		t.Fatal("capture has no NFQA_TIMESTAMP")
	}
	sec := binary.BigEndian.Uint64(raw[i+4:])
	usec := binary.BigEndian.Uint64(raw[i+12:])
	if want := int64(sec)*1e9 + int64(usec)*1e3; p.Timestamp != want || usec >= 1e6 {
		t.Errorf("timestamp %d, want %d", p.Timestamp, want)
	}
	if p.Len != 128 || p.Hook != 2 {
		t.Errorf("parsed %+v", p)
	}
}

func TestParsePacketLengths(t *testing.T) {
	requireLittleEndian(t)
	hdr := appendAttrHeader(nil, 7, nfqaPacketHdr)
	hdr = append(hdr, 0, 0, 0, 42, 0x86, 0xdd, 2, 0) // id 42, IPv6, forward, pad
	payload := func(n int) []byte {
		b := appendAttrHeader(nil, n, nfqaPayload)
		b = append(b, make([]byte, n)...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	capLen := appendBE32Attr(nil, nfqaCapLen, 1400)
	nfgen := []byte{10, 0, 0, 1}
	for _, tc := range []struct {
		name  string
		attrs [][]byte
		want  uint32
	}{
		{"whole packet copied", [][]byte{hdr, payload(60)}, 60},
		{"cut, cap len first (kernel order)", [][]byte{hdr, capLen, payload(1)}, 1400},
		{"cut, cap len last", [][]byte{hdr, payload(1), capLen}, 1400},
		{"no payload (copy meta)", [][]byte{hdr}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Join(append([][]byte{nfgen}, tc.attrs...), nil)
			p, err := parsePacket(b)
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != 42 || p.Queue != 1 || p.HWProtocol != 0x86dd || p.Len != tc.want {
				t.Errorf("got %+v, want id 42 queue 1 IPv6 len %d", p, tc.want)
			}
		})
	}
	if _, err := parsePacket(bytes.Join([][]byte{nfgen, payload(4)}, nil)); err == nil {
		t.Error("no error for a packet message without NFQA_PACKET_HDR")
	}
	bad := bytes.Join([][]byte{nfgen, hdr}, nil)
	binary.NativeEndian.PutUint16(bad[4:], 200) // attribute longer than the message
	if _, err := parsePacket(bad); err == nil {
		t.Error("no error for an attribute running past the message")
	}
}

func TestNextMessageSeveral(t *testing.T) {
	t.Parallel()
	b := appendVerdict(nil, 1, 1, false, nfDrop, 10)
	b = appendVerdict(b, 1, 2, true, nfAccept, 20)
	var seqs []uint32
	for len(b) > 0 {
		m, rest, err := nextMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.Seq)
		b = rest
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("seqs %v", seqs)
	}
	if _, _, err := nextMessage([]byte{1, 2, 3}); err == nil {
		t.Error("no error for 3 bytes")
	}
}

func TestParseError(t *testing.T) {
	// NLMSG_ERROR payload: int32 error, then the header of the request.
	req := appendUnbind(nil, 0, 77)
	b := binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff)) // -EPERM
	b = append(b, req[:nlmsgHdrLen]...)
	errno, seq, err := parseError(b)
	if err != nil || errno != -1 || seq != 77 {
		t.Errorf("got %d %d %v, want -1 77", errno, seq, err)
	}
	if _, _, err := parseError(b[:10]); err == nil {
		t.Error("no error for a short payload")
	}
}

func FuzzParsePacket(f *testing.F) {
	raw, err := os.ReadFile("testdata/packet-ipv4-ping.bin")
	if err != nil {
		f.Fatalf("seed: %v", err)
	}
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			m, rest, err := nextMessage(b)
			if err != nil {
				return
			}
			parsePacket(m.Payload)
			parseError(m.Payload)
			b = rest
		}
	})
}
