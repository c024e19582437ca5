package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// The wire backends through the command line: lab up --emulator afpacket
// (afxdp) puts a wire namespace between client and router whose emulator
// delays both directions (ping's RTT is at least the two delays, the
// counters saw the frames); lab down leaves nothing, and neither does lab
// clean after the owner was killed.
func TestLabWireBackends(t *testing.T) {
	labtest.Require(t)
	rttRe := regexp.MustCompile(`rtt min/avg/max/mdev = ([0-9.]+)/`)
	for _, backend := range []string{labpath.BackendAFPacket, labpath.BackendAFXDP} {
		t.Run(backend, func(t *testing.T) {
			name := "w" + lab.NewName()
			t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
			st := labUpJSON(t, "--name", name, "--rtt", "40ms", "--emulator", backend)
			var r result
			if st.Backend != backend || st.Path.Emulator != backend {
				t.Errorf("state: backend %q, path emulator %q; want %s", st.Backend, st.Path.Emulator, backend)
			}
			wire := lab.NamespaceName(name, lab.Wire)
			if !netns.Exists(wire) || !strings.Contains(strings.Join(lab.NamespacesOf(name), " "), wire) {
				t.Errorf("namespace %s missing or not listed: %v", wire, lab.NamespacesOf(name))
			}
			recorded := false
			for _, res := range st.Resources {
				recorded = recorded || res.Kind == lab.KindNetns && res.Name == wire
			}
			if !recorded {
				t.Errorf("the state does not record %s: %+v", wire, st.Resources)
			}
			for _, addr := range []string{lab.ServerV4().String(), lab.ServerV6().String()} {
				r = ovpnperf(t, "lab", "exec", name, "client", "--", "ping", "-c", "3", "-i", "0.2", addr).mustSucceed(t)
				m := rttRe.FindStringSubmatch(r.stdout)
				if m == nil {
					t.Fatalf("ping %s: %s", addr, r.stdout)
				}
				if rtt, _ := strconv.ParseFloat(m[1], 64); rtt < 40 || rtt > 60 {
					t.Errorf("ping %s through the %s wire: min RTT %.1f ms, want 40–60", addr, backend, rtt)
				}
			}
			// The counters are written every 250 ms: wait for a snapshot
			// with the last replies in it.
			var es *emulate.Stats
			for deadline := time.Now().Add(3 * time.Second); ; {
				r = ovpnperf(t, "lab", "status", "--json", name).mustSucceed(t)
				var sts []struct {
					Backend  string         `json:"emulation_backend"`
					Emulator *emulate.Stats `json:"emulator"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || len(sts) != 1 || sts[0].Emulator == nil || sts[0].Backend != backend {
					t.Fatalf("lab status --json: %v\n%s", err, r.stdout)
				}
				es = sts[0].Emulator
				if es.Backend != backend || len(es.Queues) != 2 {
					t.Fatalf("emulator counters: backend %q, %d queues; want %s, 2", es.Backend, len(es.Queues), backend)
				}
				// 6 echoes (and their replies) each way.
				if es.Queues[0].Released >= 6 && es.Queues[1].Released >= 6 || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			for _, q := range es.Queues {
				if q.Released < 6 || q.Delay != 20*time.Millisecond {
					t.Errorf("queue %d released %d frames with delay %v; want at least 6 with 20ms", q.Num, q.Released, q.Delay)
				}
			}
			r = ovpnperf(t, "lab", "status", name).mustSucceed(t)
			if !strings.Contains(r.stdout, " "+backend+" ") {
				t.Errorf("lab status does not name %s:\n%s", backend, r.stdout)
			}
			if want := "backend " + backend + ": --emulator " + backend + " asked for it"; !strings.Contains(r.stdout, want) {
				t.Errorf("lab status does not say why (%q):\n%s", want, r.stdout)
			}
			ovpnperf(t, "lab", "down", name).mustSucceed(t)
			labtest.CheckGone(t, name)
			if st.OwnerAlive() {
				t.Errorf("owner %d still runs after lab down", st.Owner.Pid)
			}

			// SIGKILL the owner, then lab clean: the wire goes too.
			st = labUpJSON(t, "--name", name, "--rtt", "10ms", "--emulator", backend)
			killOwner(t, st)
			if !netns.Exists(wire) {
				t.Errorf("%s gone before lab clean", wire)
			}
			cleanAfterKill(t, name, st)
		})
	}
}

// On a lossy path the AF_PACKET wire sees packets, not GSO aggregates: a
// lost aggregate would be dozens of lost packets. A 2 s TCP flow through
// 1 % loss crosses in frames no larger than a full-size packet on average.
func TestLabWireLossHitsPackets(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "iperf3")
	name := "wl" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	ovpnperf(t, "lab", "up", "--name", name, "--rate", "100mbit", "--rtt", "20ms", "--loss", "1%", "--emulator", labpath.BackendAFPacket).mustSucceed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := lab.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := iperf.StartServer(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Server, argv...) }, iperf.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	res, err := iperf.Run(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Client, argv...) },
		iperf.ClientOptions{Server: lab.ServerV4(), Port: srv.Port(), Duration: 2 * time.Second, PathSlack: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * emulate.StatsInterval)
	es, err := l.Stats()
	if err != nil {
		t.Fatal(err)
	}
	up := es.Queues[0]
	if up.Received == 0 {
		t.Fatalf("no frames through the wire: %+v", up)
	}
	mean := up.ReceivedBytes / up.Received
	t.Logf("%.1f Mbit/s, %d frames up, %d bytes on average, %d dropped for loss", res.ReceivedBitsPerSec/1e6, up.Received, mean, up.DroppedLoss)
	if mean > 1600 {
		t.Errorf("frames of %d bytes on average cross the lossy AF_PACKET wire: GSO aggregates, so loss hits many packets at once", mean)
	}
}

// On the AF_XDP wire the router and the client receive what the wire sends
// them through a threaded NAPI with GRO, not inside the emulator's send
// (docs/emulator.md "The AF_XDP data path"): a 2 s TCP flow up leaves the
// router towards the server in GRO aggregates, not in the single frames
// that crossed the wire.
func TestLabWireXDPReceiveAggregates(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "iperf3")
	name := "wg" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	ovpnperf(t, "lab", "up", "--name", name, "--rate", "200mbit", "--rtt", "20ms", "--emulator", labpath.BackendAFXDP).mustSucceed(t)
	l, err := lab.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		node   lab.Node
		ifname string
	}{{lab.Client, "c0"}, {lab.Router, "rc"}} {
		r := ovpnperf(t, "lab", "exec", name, string(p.node), "--", "cat", "/sys/class/net/"+p.ifname+"/threaded").mustSucceed(t)
		if strings.TrimSpace(r.stdout) != "1" {
			t.Errorf("%s of %s: threaded NAPI %q, want 1", p.ifname, p.node, strings.TrimSpace(r.stdout))
		}
	}
	txRS := func() (packets, bytes uint64) {
		h, err := netns.Handle(l.Namespace(lab.Router))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		link, err := h.LinkByName("rs")
		if err != nil {
			t.Fatal(err)
		}
		s := link.Attrs().Statistics
		return s.TxPackets, s.TxBytes
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := iperf.StartServer(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Server, argv...) }, iperf.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	p0, b0 := txRS()
	res, err := iperf.Run(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Client, argv...) },
		iperf.ClientOptions{Server: lab.ServerV4(), Port: srv.Port(), Duration: 2 * time.Second, PathSlack: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p1, b1 := txRS()
	if p1 == p0 {
		t.Fatal("nothing left the router towards the server")
	}
	mean := (b1 - b0) / (p1 - p0)
	t.Logf("%.1f Mbit/s, %d packets out of rs, %d bytes on average", res.ReceivedBitsPerSec/1e6, p1-p0, mean)
	if mean < 3000 {
		t.Errorf("the router forwarded packets of %d bytes on average: single frames, so its receive ran frame by frame (in the emulator's send)", mean)
	}
}

// An AF_PACKET lab, too, has rc and c0 receive in NAPI threads with GRO
// and UDP GRO forwarding, which makes the wire's frames (owned by its
// sending socket) eligible for the peer's NAPI; otherwise the router's
// forwarding runs inside the emulator's sendmmsg (lab.wireReceive). The
// wire ports keep TSO, so TCP aggregates still cross whole.
func TestLabWireAFPacketReceiveThreads(t *testing.T) {
	labtest.Require(t)
	name := "wp" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	ovpnperf(t, "lab", "up", "--name", name, "--rate", "200mbit", "--rtt", "20ms", "--emulator", labpath.BackendAFPacket).mustSucceed(t)
	for _, p := range []struct {
		node   lab.Node
		ifname string
		file   string
		want   string
	}{
		{lab.Client, "c0", "threaded", "1"}, {lab.Router, "rc", "threaded", "1"},
	} {
		r := ovpnperf(t, "lab", "exec", name, string(p.node), "--", "cat", "/sys/class/net/"+p.ifname+"/"+p.file).mustSucceed(t)
		if got := strings.TrimSpace(r.stdout); got != p.want {
			t.Errorf("%s of %s: %s %q, want %s", p.ifname, p.node, p.file, got, p.want)
		}
	}
}

// lab run across the AF_PACKET wire: every row valid, and the document
// names the backend. 40 ms for the reason TestLabRunWAN gives; a run with
// a row refused while the hypervisor took the CPUs is measured again
// (labRunMeasured).
func TestLabRunAFPacket(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	rep, _ := labRunMeasured(t, func(name string) []string {
		return []string{"lab", "run", "--name", name, "--emulator", "afpacket", "--rate", "100mbit", "--rtt", "40ms",
			"--variant", "default", "--repeat", "1", "--json"}
	})
	if rep.Host.EmulationBackend != labpath.BackendAFPacket {
		t.Errorf("host.emulation_backend %q, want afpacket", rep.Host.EmulationBackend)
	}
	if want := "--emulator afpacket asked for it"; rep.Host.EmulationBackendWhy != want {
		t.Errorf("host.emulation_backend_why %q, want %q", rep.Host.EmulationBackendWhy, want)
	}
	if len(rep.Rows) != 4 {
		t.Errorf("%d rows, want routed and tunnel, up and down", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		t.Logf("%s %s %s: %.1f Mbit/s valid %v %s", row.Variant, row.Path, row.Direction, row.MedianBps/1e6, row.Valid, row.Error)
		if !row.Valid || row.Error != "" || row.Refusal != nil || len(row.SamplesBps) != 1 || row.MedianBps < 50e6 {
			t.Errorf("%s %s %s: valid %v, refusal %v, samples %v", row.Variant, row.Path, row.Direction, row.Valid, row.Refusal, row.SamplesBps)
		}
	}
}

// --emulator refuses a name that is no backend, and netem on a kernel
// without it, with one line, exit 2 and nothing built.
func TestLabEmulatorBadInput(t *testing.T) {
	testenv.RequireRoot(t)
	name := "b" + lab.NewName()
	cases := []badCase{
		{[]string{"lab", "up", "--name", name, "--rtt", "20ms", "--emulator", "bogus"}, "--emulator"},
		{[]string{"lab", "up", "--name", name, "--rtt", "20ms", "--emulator", ""}, "--emulator"},
		{[]string{"lab", "run", "--name", name, "--rtt", "20ms", "--emulator", "bogus"}, "--emulator"},
		{[]string{"lab", "calibrate", "--emulator", "bogus"}, "--emulator"},
	}
	if !lab.NetemAvailable() {
		cases = append(cases,
			badCase{[]string{"lab", "up", "--name", name, "--rtt", "20ms", "--emulator", "netem"}, "sch_netem"},
			badCase{[]string{"lab", "run", "--name", name, "--rtt", "20ms", "--emulator", "netem"}, "sch_netem"},
			badCase{[]string{"lab", "calibrate", "--emulator", "netem"}, "sch_netem"})
	}
	labsBefore := calibrationLabs(t)
	for _, c := range cases {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
	labtest.CheckGone(t, name)
	checkGoneRun(t, name)
	if after := calibrationLabs(t); after != labsBefore {
		t.Errorf("bad input left calibration labs: before %q, after %q", labsBefore, after)
	}
}

// lab calibrate --emulator afpacket measures the AF_PACKET wire: the
// record names it and its lateness comes from that emulator's counters.
func TestLabCalibrateAFPacket(t *testing.T) {
	// It judges the record's backend and counters, not a ceiling: it
	// overlaps the other tests that judge no rate.
	t.Parallel()
	labtest.Require(t)
	record := filepath.Join(t.TempDir(), "ceiling.json")
	r := ovpnperf(t, "lab", "calibrate", "--emulator", "afpacket", "--rates", "1000", "--duration", "1s", "--record", record, "--json").mustSucceed(t)
	var c ceilingdoc.Ceiling
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		t.Fatalf("lab calibrate --json: %v\n%s", err, r.stdout)
	}
	if c.Backend != labpath.BackendAFPacket || len(c.Steps) != 1 {
		t.Fatalf("record: backend %q, %d steps; want afpacket, 1", c.Backend, len(c.Steps))
	}
	for i, d := range c.Steps[0].Directions {
		if d.LatenessFrom != "emulator" || d.Released == 0 {
			t.Errorf("direction %d: lateness from %q, %d released; want the emulator's counters", i, d.LatenessFrom, d.Released)
		}
	}
	if !strings.Contains(r.stderr, "calibrating the afpacket emulation") {
		t.Errorf("progress does not name the backend: %s", r.stderr)
	}
}
