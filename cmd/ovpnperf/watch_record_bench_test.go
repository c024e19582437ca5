package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// BenchmarkWatchRecordedHour records what docs/watch.md shows: `watch
// --every 5m` for an hour on a real tunnel across a 20 Mbit/s lab path,
// with the tunnel's own packets held to about 5 Mbit/s at the router (an
// iptables packet-rate limit on OpenVPN's port, both directions) from
// minute 20 to minute 35, so that the findings before, during and after
// can be read from the history. It is a benchmark because it takes an
// hour:
//
//	go test -run '^$' -bench WatchRecordedHour -benchtime 1x -timeout 90m ./cmd/ovpnperf
//
// OVPNPERF_WATCH_RECORD=DIR keeps the history (DIR/watch-hour.jsonl) and
// the watcher's output; OVPNPERF_WATCH_MINUTES shortens the hour (the
// limit then covers the same share of it).
func BenchmarkWatchRecordedHour(b *testing.B) {
	testenv.Exclusive(b)
	minutes := 60
	if m, err := strconv.Atoi(os.Getenv("OVPNPERF_WATCH_MINUTES")); err == nil && m >= 3 {
		minutes = m
	}
	total := time.Duration(minutes) * time.Minute
	limitFrom, limitTo := total/3, total*35/60
	every := "5m"
	if minutes < 60 {
		every = (total / 12).Round(10 * time.Second).String()
	}
	dir := os.Getenv("OVPNPERF_WATCH_RECORD")
	if dir == "" {
		dir = b.TempDir()
	}
	hist := filepath.Join(dir, "watch-hour.jsonl")
	for i := 0; i < b.N; i++ {
		mb := newMeasureBench(b, labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6}, Down: labpath.Link{RateBitsPerSec: 20e6}}, true, nil)
		ctx, cancel := context.WithTimeout(context.Background(), total+5*time.Minute)
		out, err := os.Create(filepath.Join(dir, "watch-hour.log"))
		if err != nil {
			b.Fatal(err)
		}
		listen := netipPort(lab.ClientV4().String(), 9478)
		w := exec.CommandContext(ctx, "ip", "netns", "exec", mb.lab.Namespace(lab.Client), binary, "watch", lab.ServerV4().String(),
			"--tunnel", mb.tun.ServerAddr.String(), "--listen", listen, "--every", every, "--history", hist)
		w.Stdout, w.Stderr = out, out
		start := time.Now()
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(limitFrom)
		load, _ := hostinfo.LoadAvg()
		fmt.Fprintf(out, "# %s: tunnel limited to 450 packets/s each way (load %.2f %.2f %.2f)\n", time.Now().UTC().Format(time.RFC3339), load[0], load[1], load[2])
		// 450 datagrams a second of about 1400 bytes each way.
		unlimit := limitTunnelPackets(b, mb.lab, 450)
		time.Sleep(limitTo - limitFrom)
		unlimit()
		load, _ = hostinfo.LoadAvg()
		fmt.Fprintf(out, "# %s: limit removed (load %.2f %.2f %.2f)\n", time.Now().UTC().Format(time.RFC3339), load[0], load[1], load[2])
		time.Sleep(total - time.Since(start))
		w.Process.Signal(os.Interrupt)
		w.Wait()
		cancel()
		out.Close()
		b.Logf("history %s (%s, every %s, limited %s–%s)", hist, total, every, limitFrom, limitTo)
	}
}
