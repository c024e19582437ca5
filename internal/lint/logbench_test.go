package lint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// bigLog is about 50 MB of real OpenVPN log lines (the captured logs in
// internal/openvpn/testdata/logs, over and over), half of them with
// journalctl's prefix, as `journalctl -u openvpn-server@x | ovpnperf
// lint --log -` would feed a busy server's month.
func bigLog(tb testing.TB, size int) []byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "openvpn", "testdata", "logs", "*.log"))
	if len(files) == 0 {
		tb.Fatal("no captured logs")
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimRight(string(b), "\n"), "\n")...)
	}
	var buf bytes.Buffer
	for i := 0; buf.Len() < size; i++ {
		l := lines[i%len(lines)]
		if i%2 == 0 {
			fmt.Fprintf(&buf, "Nov 23 10:%02d:%02d vpn1 openvpn[%d]: ", i/60%60, i%60, 1000+i%7)
			l = openvpn.StripTimestamp(l)
		}
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkReadLog: reading and checking a 50 MB log, as lint --log
// does (ScanLog, then CheckLog). MB/s is the figure to compare.
func BenchmarkReadLog(b *testing.B) {
	data := bigLog(b, 50<<20)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		rep, err := openvpn.ScanLog(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		_ = CheckLog(rep, "bench.log", nil, Context{})
	}
}
