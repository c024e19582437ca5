package measure

import (
	"strings"
	"testing"
)

// Sizes and counts are checked as rates and times are; a measured overhead
// may be below 0 (a compressing tunnel's datagrams are smaller than what
// they carry).
func TestCheckFiguresSizesAndCounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		doc, want string // want "" = accepted
	}{
		{`{"path_mtu":1500,"overhead_bytes":52,"flows":1,"size_bytes":18}`, ""},
		{`{"path_mtu":-1400}`, "path_mtu = -1400: want a size"},
		{`{"results":[{"size_bytes":-18}]}`, "results[0].size_bytes = -18"},
		{`{"queue_bytes":1e300}`, "queue_bytes = 1e300"},
		{`{"tun_mtu":-1}`, "tun_mtu = -1"},
		{`{"flows":-1}`, "flows = -1: want a count"},
		{`{"repeat":-3}`, "repeat = -3"},
		{`{"measured_overhead_bytes":-12.5}`, ""},
		{`{"mtu_advice":"lower tun-mtu","tun_mtu_1500_fits":true}`, ""},
	} {
		err := CheckFigures([]byte(c.doc))
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}
