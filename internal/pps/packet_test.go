package pps

import (
	"bytes"
	"testing"
)

func TestProbeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, p := range []Probe{
		{},
		{Session: 1, Flow: 2, Seq: 3, SentNs: 4},
		{Session: 0xffffffff, Flow: 0xffff, Seq: 0xffffffff, SentNs: maxStamp},
		{Session: 0xdeadbeef, Flow: 63, Seq: 1 << 31, SentNs: 300e9},
	} {
		b := make([]byte, 64)
		for i := range b {
			b[i] = 0xaa
		}
		p.Encode(b)
		if !IsProbe(b) {
			t.Fatalf("%+v: encoded probe not recognised", p)
		}
		got, err := DecodeProbe(b)
		if err != nil || got != p {
			t.Errorf("round trip %+v -> %+v, %v", p, got, err)
		}
		if !bytes.Equal(b[MinSize:], bytes.Repeat([]byte{0xaa}, 64-MinSize)) {
			t.Errorf("Encode touched the padding")
		}
		if probeSession(b) != p.Session {
			t.Errorf("probeSession = %d, want %d", probeSession(b), p.Session)
		}
	}
}

func TestProbeWireFormat(t *testing.T) {
	t.Parallel()
	b := make([]byte, MinSize)
	Probe{Session: 0x01020304, Flow: 0x0506, Seq: 0x0708090a, SentNs: 0x0b0c0d0e0f10}.Encode(b)
	want := []byte{'p', 'd', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if !bytes.Equal(b, want) {
		t.Errorf("wire = % x, want % x", b, want)
	}
}

func TestDecodeProbeRejects(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, []byte("pd"), make([]byte, MinSize), append([]byte("oPPS"), make([]byte, 20)...), []byte("pd345678901234567")} {
		if _, err := DecodeProbe(b); err == nil {
			t.Errorf("DecodeProbe(% x) accepted", b)
		}
	}
}

func TestStampWrapsAt48Bits(t *testing.T) {
	t.Parallel()
	b := make([]byte, MinSize)
	Probe{SentNs: 1<<48 + 5}.Encode(b)
	p, _ := DecodeProbe(b)
	if p.SentNs != 5 {
		t.Errorf("SentNs = %d, want 5", p.SentNs)
	}
}
