package hostinfo

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestParseCPUInfo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "cpuinfo_amd_epyc.txt"))
	if err != nil {
		t.Fatal(err)
	}
	c := ParseCPUInfo(b)
	if c.Model != "AMD EPYC" || c.Count != 2 || !c.AES() {
		t.Errorf("got %+v", c)
	}
	for _, f := range []string{"aes", "pclmulqdq", "avx2"} {
		if !c.Flags[f] {
			t.Errorf("flag %s missing", f)
		}
	}
	if c.Flags["processor"] || c.Flags[":"] {
		t.Error("junk in flags")
	}
	// The same machine without AES: only the whole word counts ("vaes",
	// "aes" inside other flags must not).
	if noAES := ParseCPUInfo(bytes.ReplaceAll(b, []byte(" aes "), []byte(" "))); noAES.AES() {
		t.Error("aes found after removing it (matched vaes?)")
	}
	// arm64 layout: no "model name", features in "Features"; the first
	// processor's flags only.
	arm := ParseCPUInfo([]byte("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\nCPU implementer\t: 0x41\n\n" +
		"processor\t: 1\nFeatures\t: fp asimd x\n\nHardware\t: BCM2835\n"))
	if arm.Model != "BCM2835" || arm.Count != 2 || !arm.AES() || arm.Flags["x"] {
		t.Errorf("arm: got %+v", arm)
	}
}

func TestThisHost(t *testing.T) {
	rel, arch, err := Kernel()
	if err != nil || rel == "" || arch == "" {
		t.Fatalf("Kernel() = %q, %q, %v", rel, arch, err)
	}
	if c, err := ReadCPU(); err != nil || c.Count < 1 || CPUCount() != c.Count {
		t.Errorf("ReadCPU() = %+v, %v; CPUCount() = %d", c, err, CPUCount())
	}
	if l, err := LoadAvg(); err != nil || l[0] < 0 || l[2] < 0 {
		t.Errorf("LoadAvg() = %v, %v", l, err)
	}
}
