package pps

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// The control exchange runs over UDP on the same port as the probes:
//
//	client                                  server
//	  | HELLO nonce, version, params  --->    |  validates, caps duration
//	  |   <--- ACCEPT nonce, session, params, limits   (or REFUSE nonce, reason)
//	  | probes (session id inside)    <-->    |  echoed while the session lives
//	  | FINISH nonce, session         --->    |
//	  |   <--- REPORT nonce, session, server counters and CPU
//	  | SERIES nonce, session, from   --->    |  one-way tests only, repeated
//	  |   <--- SERIESDATA nonce, session, from, total, counts   until all read
//
// A one-way test (Params.OneWay) is not echoed: the server counts the probes
// it received by the second (of the client's clock) they were sent in, and
// the client reads that series after FINISH, seriesPage seconds per
// SERIES request, so that no answer is larger than its request. The flag
// travels in a byte after the parameters of HELLO and ACCEPT, where a server
// that predates it reads padding and answers without it: the client then
// stops before sending load.
//
// The nonce is 16 random bytes chosen by the client; replies carry it back,
// so a client ignores anything that does not answer its own request, and
// FINISH must carry the nonce of the HELLO that opened the session, so that
// only the client that opened a session can close it. Requests are padded to
// requestLen so that no reply is larger than the request that caused it: a
// pps server cannot amplify traffic towards a spoofed address.
//
// A client and server that share a key (--key-file on both) authenticate
// the hello: the client sets flagSigned, writes the time it sent the hello
// and an HMAC-SHA256 over everything before the MAC into the padding:
//
//	hello: header | params | flags | … zero … | unix ms (8) @88 | HMAC (32) @96..128
//
// A server with the key gives a signed hello precedence: when its session
// table is full it drops an unauthenticated session to make room. It
// refuses a signed hello whose MAC does not verify, whose time is more than
// signedHelloSkew away from its own, or whose nonce it has seen (replay).
// Unsigned hellos are served as before, within the per-source limit.
//
// Every message starts with the header
//
//	0        4         5      6       22
//	| "oPPS" | version | type | nonce |
const (
	// Version is the control protocol version this package speaks.
	Version = 1

	headerLen  = 22
	requestLen = 128
	maxReason  = 100

	// macOff and timeOff place the hello's authentication in its padding.
	macOff  = requestLen - sha256.Size
	timeOff = macOff - 8
	// signedHelloSkew bounds the clock difference a signed hello may show.
	signedHelloSkew = 2 * time.Minute
)

var controlMagic = [4]byte{'o', 'P', 'P', 'S'}

// MsgType is the type of a control message.
type MsgType uint8

// Control message types.
const (
	MsgHello  MsgType = 1
	MsgAccept MsgType = 2
	MsgRefuse MsgType = 3
	MsgFinish MsgType = 4
	MsgReport MsgType = 5
	// MsgSeries asks for a page of a one-way session's series.
	MsgSeries MsgType = 6
	// MsgSeriesData answers MsgSeries.
	MsgSeriesData MsgType = 7
)

func (t MsgType) String() string {
	switch t {
	case MsgHello:
		return "hello"
	case MsgAccept:
		return "accept"
	case MsgRefuse:
		return "refuse"
	case MsgFinish:
		return "finish"
	case MsgReport:
		return "report"
	case MsgSeries:
		return "series"
	case MsgSeriesData:
		return "series-data"
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// Params are the parameters of a test as the client asks for them and the
// server accepts them.
type Params struct {
	// RatePPS is the total probe rate over all flows; 0 = as fast as possible.
	RatePPS uint64 `json:"rate_pps"`
	// Size is the UDP payload of each probe in bytes.
	Size int `json:"size_bytes"`
	// Duration bounds how long the client sends.
	Duration time.Duration `json:"duration_ns"`
	// Flows is the number of parallel flows (sockets, source ports).
	Flows int `json:"flows"`
	// Timeout is how long the client waits for an echo before counting
	// the probe lost.
	Timeout time.Duration `json:"timeout_ns"`
	// OneWay asks the server to count the probes instead of echoing them,
	// as sockperf throughput and iperf3 -u measure: no RTT, and loss
	// from the server's per-second counts.
	OneWay bool `json:"one_way,omitempty"`
}

// Limits are what a server accepts.
type Limits struct {
	MaxDuration time.Duration `json:"max_duration_ns"`
	MaxFlows    int           `json:"max_flows"`
	MaxSize     int           `json:"max_size_bytes"`
	MaxTimeout  time.Duration `json:"max_timeout_ns"`
	// MaxSessions bounds the sessions served at once (not sent on the wire).
	MaxSessions int `json:"-"`
	// MaxPerSource bounds the unauthenticated sessions of one source
	// address, so that one host cannot take every slot.
	MaxPerSource int `json:"-"`
	// IdleTimeout expires a session that has received no probe within
	// IdleTimeout plus its Timeout (one round trip at most) of being
	// accepted: a hello alone holds a slot only briefly.
	IdleTimeout time.Duration `json:"-"`
}

// DefaultLimits returns the limits of `ovpnperf pps server`.
func DefaultLimits() Limits {
	return Limits{
		MaxDuration:  300 * time.Second,
		MaxFlows:     64,
		MaxSize:      MaxSize,
		MaxTimeout:   10 * time.Second,
		MaxSessions:  16,
		MaxPerSource: 2,
		IdleTimeout:  2 * time.Second,
	}
}

// ServerReport is what the server counted for a session.
type ServerReport struct {
	// Received counts probes of the session that reached the server.
	Received uint64 `json:"received"`
	// Echoed counts probes the server handed to its kernel to send back.
	Echoed uint64 `json:"echoed"`
	// CPUUser and CPUSystem are the server process's CPU time during the
	// session (all its sessions, if several ran at once).
	CPUUser   time.Duration `json:"cpu_user_ns"`
	CPUSystem time.Duration `json:"cpu_system_ns"`
	// Elapsed is the wall time from accepting the session to the report.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Control is one parsed control message. Which fields are meaningful depends
// on Type.
type Control struct {
	Version uint8
	Type    MsgType
	Nonce   [16]byte
	Session uint32       // accept, finish, report
	Params  Params       // hello, accept
	Limits  Limits       // accept
	Reason  string       // refuse
	Report  ServerReport // report
	// SeriesFrom is the first second of a series page (series, series-data).
	SeriesFrom uint32
	// SeriesTotal is how many seconds the whole series has (series-data).
	SeriesTotal uint32
	// Series holds at most seriesPage per-second counts (series-data).
	Series []uint64
	// Key, when set on a hello to be marshalled, signs it (see above).
	Key []byte
	// Signed reports that a parsed hello carries a signature; Verify
	// checks it.
	Signed bool
	// SentAt is the signed hello's send time.
	SentAt time.Time
	raw    []byte
}

// IsControl reports whether b starts with the control magic.
func IsControl(b []byte) bool {
	return len(b) >= 4 && [4]byte(b[:4]) == controlMagic
}

// Body sizes after the header.
const (
	paramsLen = 8 + 4 + 4 + 2 + 4 // rate, size, duration ms, flows, timeout ms
	limitsLen = 4 + 2 + 4 + 4     // max duration ms, max flows, max size, max timeout ms
	reportLen = 8 * 5
	// flagOneWay is bit 0 of the flags byte after the parameters.
	flagOneWay = 1
	// flagSigned (bit 1, hello only) says the padding carries a time and MAC.
	flagSigned = 2
	// seriesPage is the most counts in one series-data answer: 22 header
	// + 4 session + 4 from + 4 total + 1 n + 4 n ≤ requestLen.
	seriesPage = (requestLen - headerLen - 13) / 4
)

// Marshal encodes the message. Requests are padded to requestLen.
func (c *Control) Marshal() ([]byte, error) {
	b := make([]byte, headerLen, requestLen)
	copy(b, controlMagic[:])
	b[4] = c.Version
	b[5] = byte(c.Type)
	copy(b[6:22], c.Nonce[:])
	switch c.Type {
	case MsgHello:
		b = appendParams(b, c.Params)
		b = append(b, flagsOf(c.Params))
	case MsgAccept:
		b = binary.BigEndian.AppendUint32(b, c.Session)
		b = appendParams(b, c.Params)
		b = appendLimits(b, c.Limits)
		b = append(b, flagsOf(c.Params))
	case MsgSeries:
		b = binary.BigEndian.AppendUint32(b, c.Session)
		b = binary.BigEndian.AppendUint32(b, c.SeriesFrom)
	case MsgSeriesData:
		if len(c.Series) > seriesPage {
			return nil, fmt.Errorf("series page of %d counts, at most %d", len(c.Series), seriesPage)
		}
		b = binary.BigEndian.AppendUint32(b, c.Session)
		b = binary.BigEndian.AppendUint32(b, c.SeriesFrom)
		b = binary.BigEndian.AppendUint32(b, c.SeriesTotal)
		b = append(b, byte(len(c.Series)))
		for _, v := range c.Series {
			b = binary.BigEndian.AppendUint32(b, clampU32(int64(min(v, 1<<62))))
		}
	case MsgRefuse:
		r := c.Reason
		if len(r) > maxReason {
			r = r[:maxReason]
		}
		b = append(b, byte(len(r)))
		b = append(b, r...)
	case MsgFinish:
		b = binary.BigEndian.AppendUint32(b, c.Session)
	case MsgReport:
		b = binary.BigEndian.AppendUint32(b, c.Session)
		b = binary.BigEndian.AppendUint64(b, c.Report.Received)
		b = binary.BigEndian.AppendUint64(b, c.Report.Echoed)
		b = binary.BigEndian.AppendUint64(b, uint64(c.Report.CPUUser))
		b = binary.BigEndian.AppendUint64(b, uint64(c.Report.CPUSystem))
		b = binary.BigEndian.AppendUint64(b, uint64(c.Report.Elapsed))
	default:
		return nil, fmt.Errorf("cannot marshal control message of %v", c.Type)
	}
	if c.Type == MsgHello || c.Type == MsgFinish || c.Type == MsgSeries {
		b = b[:requestLen]
	}
	if c.Type == MsgHello && len(c.Key) > 0 {
		b[headerLen+paramsLen] |= flagSigned
		at := c.SentAt
		if at.IsZero() {
			at = time.Now()
		}
		binary.BigEndian.PutUint64(b[timeOff:], uint64(at.UnixMilli()))
		copy(b[macOff:], helloMAC(c.Key, b))
	}
	return b, nil
}

func appendParams(b []byte, p Params) []byte {
	b = binary.BigEndian.AppendUint64(b, p.RatePPS)
	b = binary.BigEndian.AppendUint32(b, clampU32(int64(p.Size)))
	b = binary.BigEndian.AppendUint32(b, clampU32(p.Duration.Milliseconds()))
	b = binary.BigEndian.AppendUint16(b, uint16(min(max(p.Flows, 0), 0xffff)))
	b = binary.BigEndian.AppendUint32(b, clampU32(p.Timeout.Milliseconds()))
	return b
}

func flagsOf(p Params) byte {
	if p.OneWay {
		return flagOneWay
	}
	return 0
}

func appendLimits(b []byte, l Limits) []byte {
	b = binary.BigEndian.AppendUint32(b, clampU32(l.MaxDuration.Milliseconds()))
	b = binary.BigEndian.AppendUint16(b, uint16(min(max(l.MaxFlows, 0), 0xffff)))
	b = binary.BigEndian.AppendUint32(b, clampU32(int64(l.MaxSize)))
	b = binary.BigEndian.AppendUint32(b, clampU32(l.MaxTimeout.Milliseconds()))
	return b
}

func clampU32(v int64) uint32 { return uint32(min(max(v, 0), 0xffffffff)) }

// Errors of ParseControl. Malformed input never panics; it yields one of
// these, wrapped with detail.
var (
	ErrNotControl = errors.New("not a pps control message")
	ErrMalformed  = errors.New("malformed pps control message")
)

// ParseControl parses a control message received from the network.
// It checks the framing only; whether the values are acceptable is for
// the receiver to decide (see Limits.Check).
func ParseControl(b []byte) (*Control, error) {
	if !IsControl(b) {
		return nil, ErrNotControl
	}
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes, header needs %d", ErrMalformed, len(b), headerLen)
	}
	c := &Control{Version: b[4], Type: MsgType(b[5])}
	copy(c.Nonce[:], b[6:22])
	body := b[headerLen:]
	need := func(n int) error {
		if len(body) < n {
			return fmt.Errorf("%w: %v body of %d bytes, needs %d", ErrMalformed, c.Type, len(body), n)
		}
		return nil
	}
	if c.Version != Version {
		// Only the header of another version is understood; the caller
		// answers with a refusal naming the version it speaks.
		return c, nil
	}
	switch c.Type {
	case MsgHello:
		if len(b) < requestLen {
			return nil, fmt.Errorf("%w: hello of %d bytes, must be padded to %d", ErrMalformed, len(b), requestLen)
		}
		c.Params = parseParams(body)
		c.Params.OneWay = body[paramsLen]&flagOneWay != 0
		if body[paramsLen]&flagSigned != 0 {
			c.Signed = true
			c.SentAt = time.UnixMilli(int64(binary.BigEndian.Uint64(b[timeOff:]) & (1<<62 - 1)))
			c.raw = b[:requestLen]
		}
	case MsgAccept:
		if err := need(4 + paramsLen + limitsLen); err != nil {
			return nil, err
		}
		c.Session = binary.BigEndian.Uint32(body)
		c.Params = parseParams(body[4:])
		c.Limits = parseLimits(body[4+paramsLen:])
		// A server that predates one-way tests sends no flags byte.
		if len(body) > 4+paramsLen+limitsLen {
			c.Params.OneWay = body[4+paramsLen+limitsLen]&flagOneWay != 0
		}
	case MsgSeries:
		if len(b) < requestLen {
			return nil, fmt.Errorf("%w: series request of %d bytes, must be padded to %d", ErrMalformed, len(b), requestLen)
		}
		c.Session = binary.BigEndian.Uint32(body)
		c.SeriesFrom = binary.BigEndian.Uint32(body[4:])
	case MsgSeriesData:
		if err := need(13); err != nil {
			return nil, err
		}
		c.Session = binary.BigEndian.Uint32(body)
		c.SeriesFrom = binary.BigEndian.Uint32(body[4:])
		c.SeriesTotal = binary.BigEndian.Uint32(body[8:])
		n := int(body[12])
		if n > seriesPage {
			return nil, fmt.Errorf("%w: series page of %d counts, at most %d", ErrMalformed, n, seriesPage)
		}
		if err := need(13 + 4*n); err != nil {
			return nil, err
		}
		if n > 0 {
			c.Series = make([]uint64, n)
		}
		for i := range c.Series {
			c.Series[i] = uint64(binary.BigEndian.Uint32(body[13+4*i:]))
		}
	case MsgRefuse:
		if err := need(1); err != nil {
			return nil, err
		}
		n := int(body[0])
		if n > maxReason {
			return nil, fmt.Errorf("%w: refusal reason of %d bytes, at most %d", ErrMalformed, n, maxReason)
		}
		if err := need(1 + n); err != nil {
			return nil, err
		}
		r := body[1 : 1+n]
		if !utf8.Valid(r) {
			return nil, fmt.Errorf("%w: refusal reason is not UTF-8", ErrMalformed)
		}
		c.Reason = string(r)
	case MsgFinish:
		if len(b) < requestLen {
			return nil, fmt.Errorf("%w: finish of %d bytes, must be padded to %d", ErrMalformed, len(b), requestLen)
		}
		c.Session = binary.BigEndian.Uint32(body)
	case MsgReport:
		if err := need(4 + reportLen); err != nil {
			return nil, err
		}
		c.Session = binary.BigEndian.Uint32(body)
		r := body[4:]
		c.Report = ServerReport{
			Received:  binary.BigEndian.Uint64(r[0:]),
			Echoed:    binary.BigEndian.Uint64(r[8:]),
			CPUUser:   time.Duration(binary.BigEndian.Uint64(r[16:]) & (1<<63 - 1)),
			CPUSystem: time.Duration(binary.BigEndian.Uint64(r[24:]) & (1<<63 - 1)),
			Elapsed:   time.Duration(binary.BigEndian.Uint64(r[32:]) & (1<<63 - 1)),
		}
	default:
		return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, uint8(c.Type))
	}
	return c, nil
}

// helloMAC is the HMAC-SHA256 with key over a hello's first macOff bytes.
func helloMAC(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(b[:macOff])
	return m.Sum(nil)
}

// Verify reports whether a parsed signed hello's MAC matches key.
func (c *Control) Verify(key []byte) bool {
	if !c.Signed || len(c.raw) < requestLen || len(key) == 0 {
		return false
	}
	return hmac.Equal(c.raw[macOff:requestLen], helloMAC(key, c.raw))
}

func parseParams(b []byte) Params {
	return Params{
		RatePPS:  binary.BigEndian.Uint64(b[0:]),
		Size:     int(binary.BigEndian.Uint32(b[8:])),
		Duration: time.Duration(binary.BigEndian.Uint32(b[12:])) * time.Millisecond,
		Flows:    int(binary.BigEndian.Uint16(b[16:])),
		Timeout:  time.Duration(binary.BigEndian.Uint32(b[18:])) * time.Millisecond,
	}
}

func parseLimits(b []byte) Limits {
	return Limits{
		MaxDuration: time.Duration(binary.BigEndian.Uint32(b[0:])) * time.Millisecond,
		MaxFlows:    int(binary.BigEndian.Uint16(b[4:])),
		MaxSize:     int(binary.BigEndian.Uint32(b[6:])),
		MaxTimeout:  time.Duration(binary.BigEndian.Uint32(b[10:])) * time.Millisecond,
	}
}

// Check validates p against the limits. It returns the parameters the
// server accepts (the duration capped at MaxDuration) or a refusal reason.
func (l Limits) Check(p Params) (Params, error) {
	switch {
	case p.Size < MinSize || p.Size > l.MaxSize:
		return p, fmt.Errorf("size %d bytes outside %d..%d", p.Size, MinSize, l.MaxSize)
	case p.Flows < 1 || p.Flows > l.MaxFlows:
		return p, fmt.Errorf("%d flows outside 1..%d", p.Flows, l.MaxFlows)
	case p.Duration <= 0:
		return p, fmt.Errorf("duration must be positive")
	case p.Timeout <= 0 || p.Timeout > l.MaxTimeout:
		return p, fmt.Errorf("timeout %v outside 1ms..%v", p.Timeout, l.MaxTimeout)
	}
	p.Duration = min(p.Duration, l.MaxDuration)
	return p, nil
}
