package probe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/advise"
)

// FuzzDecode feeds any bytes to the reader of probe documents (advise
// --probe, tune --probe) and what advise makes of an accepted one: no
// input may panic, an error is one line, and accepted advice encodes as
// JSON. Seeds: testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`null`, `[null]`, `{}`, `{"schema":"ovpnperf/probe/v1","path":null}`, `{"schema":"ovpnperf/probe/v1","path":{"rtt_ms":{"value":1e308,"source":"measured"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Decode(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		for _, proto := range []string{"udp", "tcp"} {
			for _, v6 := range []bool{false, true} {
				a, err := advise.Advise(rep.Input(proto, v6))
				if err != nil {
					continue
				}
				if _, err := json.Marshal(a); err != nil {
					t.Fatalf("advice JSON: %v", err)
				}
			}
		}
	})
}
