package recipe

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// What the shaper's client tun queue does to the client's other traffic.
// The recipe measures with a 50-packet queue (shaperTxQueueLen) so that
// its samples do not wait for each other; OpenVPN's default is 500. While
// the shaper holds the upload at 100 kB/s, every other packet the client
// sends (a ping, a download's ACKs, a new connection's SYN) waits behind
// that queue: 15 ms per full packet queued. The probe runs on the shaper
// tunnel before its samples, once with each queue length: pings idle,
// then during an upload pings and a download at the same time.

// shaperDefaultTxQueueLen is Linux's default queue of a tun device, which
// OpenVPN keeps unless told --txqueuelen.
const shaperDefaultTxQueueLen = 500

// shaperQueueResult is one probe, saved in Scenario.Extra["tun_queue_probe"].
type shaperQueueResult struct {
	TxQueueLen    int       `json:"txqueuelen"`
	IdleRTTMs     []float64 `json:"idle_rtt_ms"`
	LoadedRTTMs   []float64 `json:"loaded_rtt_ms"`
	LoadedSent    int       `json:"loaded_pings_sent"`
	UploadBps     float64   `json:"upload_bps"`
	DownloadBps   float64   `json:"download_bps"`
	DownloadError string    `json:"download_error,omitempty"`
	Error         string    `json:"error,omitempty"`
}

// Probe timing: the upload runs shaperProbeUpload; the loaded pings and
// the download start shaperProbeFill into it, when the queue has filled
// (500 packets at 100 kB/s take 7.5 s to drain, TCP fills them in well
// under a second at 20 Mbit/s), and last shaperProbeLoaded.
const (
	shaperProbeUpload = 9 * time.Second
	shaperProbeFill   = 2 * time.Second
	shaperProbeLoaded = 4 * time.Second
	// Ports of the probe's own iperf3 servers (the experiment's use
	// iperf.DefaultPort and the next one).
	shaperProbePortUp   = iperf.DefaultPort + 10
	shaperProbePortDown = iperf.DefaultPort + 11
)

// setTxQueueLen sets the tun queue of the client's device (in cli, the
// lab's client namespace).
//
// Equivalent to: ip netns exec CLIENT ip link set dev DEV txqueuelen N
func setTxQueueLen(ctx context.Context, cli hostnet.Host, dev string, n int) error {
	if err := cli.LinkSetTxQLen(ctx, dev, n); err != nil {
		return fmt.Errorf("txqueuelen %d on the client's tun device %s: %w", n, dev, err)
	}
	return nil
}

// shaperQueueProbe measures the shaper tunnel t with the default queue
// and then with the recipe's, which it leaves in place for the samples.
func shaperQueueProbe(ctx context.Context, l *lab.Lab, t *tunnel.Tunnel) map[string]shaperQueueResult {
	dev := fmt.Sprintf("ovpnperf-c%d", t.Slot)
	if t.ClientLog != nil && t.ClientLog.TunDev != "" {
		dev = t.ClientLog.TunDev
	}
	cli := labHost(l, lab.Client)
	out := map[string]shaperQueueResult{}
	for _, q := range []int{shaperDefaultTxQueueLen, shaperTxQueueLen} {
		res := shaperQueueResult{TxQueueLen: q}
		if err := setTxQueueLen(ctx, cli, dev, q); err != nil {
			res.Error = err.Error()
		} else if err := shaperQueueRun(ctx, l, t, &res); err != nil {
			res.Error = err.Error()
		}
		out[fmt.Sprint(q)] = res
	}
	return out
}

func shaperQueueRun(ctx context.Context, l *lab.Lab, t *tunnel.Tunnel, res *shaperQueueResult) error {
	cmd := func(node lab.Node) iperf.CommandFunc {
		return func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, node, argv...) }
	}
	addr := t.ServerAddr.String()
	idle, err := fragPing(ctx, l, addr, 56, 10, "0.2")
	if err != nil {
		return err
	}
	res.IdleRTTMs = idle.rttMs
	var servers []*iperf.Server
	defer func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}()
	for _, port := range []int{shaperProbePortUp, shaperProbePortDown} {
		s, err := iperf.StartServer(ctx, cmd(lab.Server), iperf.ServerOptions{Port: port, Bind: t.ServerAddr})
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	var wg sync.WaitGroup
	var upErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, err := iperf.Run(ctx, cmd(lab.Client), iperf.ClientOptions{Server: t.ServerAddr, Port: shaperProbePortUp, Duration: shaperProbeUpload})
		if err != nil {
			upErr = err
			return
		}
		res.UploadBps = r.ReceivedBitsPerSec
	}()
	select {
	case <-time.After(shaperProbeFill):
	case <-ctx.Done():
		wg.Wait()
		return ctx.Err()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, err := iperf.Run(ctx, cmd(lab.Client), iperf.ClientOptions{Server: t.ServerAddr, Port: shaperProbePortDown, Duration: shaperProbeLoaded, Reverse: true})
		if err != nil {
			res.DownloadError = err.Error()
			return
		}
		res.DownloadBps = r.ReceivedBitsPerSec
	}()
	n := int(shaperProbeLoaded / (200 * time.Millisecond))
	loaded, perr := fragPing(ctx, l, addr, 56, n, "0.2")
	wg.Wait()
	if perr != nil {
		return perr
	}
	res.LoadedRTTMs, res.LoadedSent = loaded.rttMs, loaded.sent
	if upErr != nil {
		return fmt.Errorf("upload: %w", upErr)
	}
	return nil
}

// shaperQueueVerdict reports, from the saved probe, what OpenVPN's default
// tun queue does under the pushed shaper compared with the recipe's.
func shaperQueueVerdict(rep *measure.Report) measure.Verdict {
	claim := fmt.Sprintf("with OpenVPN's default %d-packet tun queue, an upload held by the pushed shaper delays the client's other traffic far more (×2 or more in ping RTT) than with the %d-packet queue the recipe sets", shaperDefaultTxQueueLen, shaperTxQueueLen)
	probe, ok := extraAs[map[string]shaperQueueResult](rep.Scenario.Extra["tun_queue_probe"])
	def, okD := probe[fmt.Sprint(shaperDefaultTxQueueLen)]
	set, okS := probe[fmt.Sprint(shaperTxQueueLen)]
	switch {
	case !ok || !okD || !okS:
		return newVerdict(claim, NotTested, "the report has no tun queue probe (recorded before ovpnperf measured it, or the probe did not run)")
	case def.Error != "" || set.Error != "":
		return newVerdict(claim, NotTested, "the probe failed: %s %s", def.Error, set.Error)
	}
	desc := func(r shaperQueueResult) string {
		s := verdict.Of(r.LoadedRTTMs)
		d := measure.FormatRate(r.DownloadBps)
		if r.DownloadError != "" {
			d = "failed (" + r.DownloadError + ")"
		}
		return fmt.Sprintf("queue %d: ping idle %.1f ms, during the upload %.0f ms (%.0f–%.0f, %d of %d replies); a download started during the upload %s; upload %s",
			r.TxQueueLen, verdict.Of(r.IdleRTTMs).Median, s.Median, s.Min, s.Max, len(r.LoadedRTTMs), r.LoadedSent, d, measure.FormatRate(r.UploadBps))
	}
	o, ratio := verdict.Faster(def.LoadedRTTMs, set.LoadedRTTMs, 2)
	return newVerdict(claim, o, "%s; %s: loaded RTT ×%.1f", desc(def), desc(set), ratio)
}
