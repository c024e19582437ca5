package emulate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// The load generator: a paced UDP stream from one network namespace to
// another, whose receiver takes the kernel's receipt time of every packet.
// It drives the emulator's benchmarks and `lab calibrate`, which measures
// the packet rate the emulator holds on this host.

// flowBatch is the number of messages per sendmmsg / recvmmsg.
const flowBatch = 64

// Flow is one stream of Count UDP datagrams of PayloadBytes each, from
// namespace From to ToAddr (an IPv4 address) in namespace To, at Rate
// datagrams per second.
type Flow struct {
	From, To, ToAddr string
	Rate             float64
	Count            int
	PayloadBytes     int // at least 16: a sequence number and the send time
	// Drain is how long the receiver waits for the last datagrams after
	// the last is sent: the path's one-way delay and a margin.
	Drain time.Duration
	// OnStart and OnSent, when set, are called when sending starts and
	// when it ends (a benchmark's timer).
	OnStart, OnSent func()
	// Stop, when set, ends the flow early once it is closed (Ctrl-C):
	// SendFlow then returns ErrFlowStopped.
	Stop <-chan struct{}
}

// ErrFlowStopped is SendFlow's error when Flow.Stop ended it.
var ErrFlowStopped = errors.New("flow stopped")

// FlowResult is what the sender and the receiver of a flow saw.
type FlowResult struct {
	Sent, Received int
	SendTime       time.Duration   // from the first send to the last
	RcvbufDrops    uint32          // datagrams the receiving socket dropped (SO_RXQ_OVFL)
	Delays         []time.Duration // one-way, per received datagram
	Reordered      int             // datagrams received after one sent later
	// MaxBehind is the most datagrams the sender was behind its schedule
	// at once, which it then sent back to back (64 to a sendmmsg): a
	// sender descheduled for a millisecond at 50 000 pps is 50 behind.
	MaxBehind int
}

// SentRate is the rate the sender managed, datagrams per second.
func (r FlowResult) SentRate() float64 {
	if r.SendTime <= 0 {
		return 0
	}
	return float64(r.Sent) / r.SendTime.Seconds()
}

// SendFlow runs one flow with sendmmsg and recvmmsg. Each datagram carries
// its sequence number and its send time, taken once per batch just before
// sendmmsg (up to 64 datagrams share one); the receiver's kernel stamps its
// receipt (SO_TIMESTAMPNS), so a delay is the path's plus the sender's
// batching, not the receiving goroutine's scheduling. It may run on any
// goroutine.
func SendFlow(f Flow) (FlowResult, error) {
	rate, count := f.Rate, f.Count
	res := FlowResult{Delays: make([]time.Duration, 0, count)}
	if f.PayloadBytes < 16 {
		return res, fmt.Errorf("flow payload of %d bytes: at least 16", f.PayloadBytes)
	}
	var rc, sc *net.UDPConn
	if err := netns.Do(f.To, func() error {
		var err error
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(f.ToAddr)})
		return err
	}); err != nil {
		return res, err
	}
	defer rc.Close()
	if err := netns.Do(f.From, func() error {
		var err error
		sc, err = net.DialUDP("udp4", nil, rc.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return res, err
	}
	defer sc.Close()
	sc.SetWriteBuffer(4 << 20)

	recvDone := make(chan error, 1)
	// The receive time is the kernel's (SO_TIMESTAMPNS, taken when the
	// receiving stack takes the packet in), so the receiver goroutine's own
	// scheduling delay does not count as emulator error. Send times are
	// CLOCK_REALTIME too.
	raw, err := rc.SyscallConn()
	if err != nil {
		return res, err
	}
	// A deep receive buffer and SO_RXQ_OVFL: datagrams the receiver itself
	// failed to take in time are counted apart from the emulator's.
	var serr error
	raw.Control(func(fd uintptr) {
		serr = errors.Join(
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20))
	})
	if serr != nil {
		return res, serr
	}
	go func() {
		pc := ipv4.NewPacketConn(rc)
		msgs := make([]ipv4.Message, flowBatch)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, 2048)}
			msgs[i].OOB = make([]byte, 128)
		}
		var lastSeq uint64
		for res.Received < count {
			k, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = nil
				}
				recvDone <- err
				return
			}
			for _, m := range msgs[:k] {
				if m.N < 16 {
					continue
				}
				at, ovfl, err := rxControl(m.OOB[:m.NN])
				if err != nil {
					recvDone <- err
					return
				}
				seq := binary.LittleEndian.Uint64(m.Buffers[0])
				if res.Received > 0 && seq < lastSeq {
					res.Reordered++
				}
				lastSeq = seq
				sent := int64(binary.LittleEndian.Uint64(m.Buffers[0][8:]))
				res.Delays = append(res.Delays, time.Duration(at-sent))
				res.Received++
				res.RcvbufDrops = max(res.RcvbufDrops, ovfl)
			}
		}
		recvDone <- nil
	}()

	pc := ipv4.NewPacketConn(sc)
	msgs := make([]ipv4.Message, flowBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, f.PayloadBytes)}
	}
	if f.OnStart != nil {
		f.OnStart()
	}
	start := monotime()
	for res.Sent < count {
		select {
		case <-f.Stop:
			return res, ErrFlowStopped
		default:
		}
		due := int(float64(monotime()-start)*rate/1e9) + 1
		res.MaxBehind = max(res.MaxBehind, min(due, count)-res.Sent)
		k := min(due-res.Sent, flowBatch, count-res.Sent)
		if k <= 0 {
			// Wait for the next datagram's time; Go's timers make this up
			// to about a millisecond, so datagrams go in bursts of up to
			// rate/1000.
			next := start + int64(float64(res.Sent)*1e9/rate)
			time.Sleep(time.Duration(next - monotime()))
			continue
		}
		now := time.Now().UnixNano()
		for i := range k {
			binary.LittleEndian.PutUint64(msgs[i].Buffers[0], uint64(res.Sent+i))
			binary.LittleEndian.PutUint64(msgs[i].Buffers[0][8:], uint64(now))
		}
		w, err := pc.WriteBatch(msgs[:k], 0)
		if err != nil {
			// The receiver ends at its read deadline or when the
			// socket closes.
			return res, fmt.Errorf("sending probes: %w", err)
		}
		res.Sent += w
	}
	res.SendTime = time.Duration(monotime() - start)
	if f.OnSent != nil {
		f.OnSent()
	}
	rc.SetReadDeadline(time.Now().Add(f.Drain))
	if err := <-recvDone; err != nil {
		return res, fmt.Errorf("receiving probes: %w", err)
	}
	return res, nil
}

// rxControl finds the SCM_TIMESTAMPNS and SO_RXQ_OVFL control messages.
func rxControl(oob []byte) (at int64, ovfl uint32, err error) {
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, cm := range cms {
		switch {
		case cm.Header.Level != unix.SOL_SOCKET:
		case cm.Header.Type == unix.SCM_TIMESTAMPNS && len(cm.Data) >= 16:
			sec := int64(binary.NativeEndian.Uint64(cm.Data))
			nsec := int64(binary.NativeEndian.Uint64(cm.Data[8:]))
			at, found = sec*1e9+nsec, true
		case cm.Header.Type == unix.SO_RXQ_OVFL && len(cm.Data) >= 4:
			ovfl = binary.NativeEndian.Uint32(cm.Data)
		}
	}
	if !found {
		return 0, 0, errors.New("no SCM_TIMESTAMPNS on a received probe")
	}
	return at, ovfl, nil
}
