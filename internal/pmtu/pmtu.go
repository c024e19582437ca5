// Package pmtu finds the path MTU to a host by sending ICMP echo probes that
// may not be fragmented, several sizes at once, and narrowing the range
// between the largest size that was answered and the smallest that was not.
//
// A router that cannot forward a probe answers "fragmentation needed"
// (ICMPv4 type 3 code 4) or "packet too big" (ICMPv6 type 2) and names its
// next-hop MTU; that hop and MTU are reported. When large probes vanish with
// no such answer while smaller ones are echoed, the path is an ICMP black
// hole: path-MTU discovery is broken there, and the search continues on echo
// replies alone.
//
//	round 1: 68 … 1280 1281 … 1400 1401 … 1492 1493 1500 … (one burst)
//	         ↓ replies raise lo, errors and silence lower hi
//	round 2: the sizes between lo and hi (all of them if few), or the MTU a
//	         router named and the size above it
//	round 3: confirm a boundary that rests on silence alone
//
// Search is independent of sockets: it drives a Prober, which the real
// raw-socket prober (NewProber) and the tests' fake both implement.
package pmtu

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// Family is the IP version probed.
type Family int

// The families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// MinMTU is the smallest MTU a link of the family may have (RFC 791, RFC 8200).
func (f Family) MinMTU() int {
	if f == IPv6 {
		return 1280
	}
	return 68
}

// HeaderBytes is the size of the IP header of a probe (no options, no
// extension headers).
func (f Family) HeaderBytes() int {
	if f == IPv6 {
		return 40
	}
	return 20
}

// Outcome is what became of one probe.
type Outcome int

// The outcomes.
const (
	// Lost: neither an echo reply nor an ICMP error arrived in time.
	Lost Outcome = iota
	// Reply: the host echoed the probe, so a packet of this size passes.
	Reply
	// TooBig: a router answered "fragmentation needed" / "packet too big".
	TooBig
	// LocalTooBig: the local kernel refused to send the probe unfragmented
	// (EMSGSIZE), because it exceeds the MTU of the outgoing interface.
	LocalTooBig
	// Unreachable: some other ICMP destination-unreachable error came back.
	Unreachable
)

func (o Outcome) String() string {
	switch o {
	case Reply:
		return "reply"
	case TooBig:
		return "too-big"
	case LocalTooBig:
		return "local-too-big"
	case Unreachable:
		return "unreachable"
	}
	return "lost"
}

// Answer is the fate of one probe of Size bytes (whole IP packet).
type Answer struct {
	Size    int
	Outcome Outcome
	// MTU is the next-hop MTU named in a TooBig answer (0 if the router
	// named none), or the interface MTU for LocalTooBig when known.
	MTU int
	// From is the source of the echo reply or ICMP error.
	From netip.Addr
	// Detail describes an Unreachable answer, e.g. "host unreachable".
	Detail string
	// RTT is the time from sending to the answer.
	RTT time.Duration
}

// Wait bounds one round of probes. The round ends when every probe is
// answered, at Max, or — once an echo reply has shown the round-trip time —
// at max(RTTFactor × the slowest reply seen, Min) after the round started.
type Wait struct {
	Max       time.Duration
	Min       time.Duration
	RTTFactor int
}

// Prober sends probes of given sizes toward one destination.
type Prober interface {
	// Round sends one probe of each size at once and returns one Answer per
	// size, in the same order. An error means the probes could not be sent
	// at all (not that they were lost).
	Round(ctx context.Context, sizes []int, w Wait) ([]Answer, error)
	// Family is the IP version probed.
	Family() Family
	// LocalMTU is the MTU of the interface the probes leave by (0 if unknown).
	LocalMTU() int
	// Close releases the sockets.
	Close() error
}

// Options tune the search.
type Options struct {
	// Max caps the largest probe size; 0 means the local interface MTU.
	Max int
	// Timeout is the longest wait for one round of answers (default 2 s):
	// on a path with a larger round-trip time probes count as lost.
	Timeout time.Duration
	// MinRoundWait is the shortest wait for a round that has seen replies
	// (default 300 ms): silence for this long after the first replies means
	// a probe vanished.
	MinRoundWait time.Duration
	// Spread is how many sizes a narrowing round may send (default 24).
	Spread int
	// Trace, if set, sees every round's answers (for --verbose and tests).
	Trace func(round int, answers []Answer)
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MinRoundWait <= 0 {
		o.MinRoundWait = 300 * time.Millisecond
	}
	if o.MinRoundWait > o.Timeout {
		o.MinRoundWait = o.Timeout
	}
	if o.Spread <= 0 {
		o.Spread = 24
	}
	return o
}

// Result is the outcome of a search.
type Result struct {
	Family Family `json:"family"`
	// PathMTU is the largest probe (whole IP packet, bytes) that was echoed.
	PathMTU int `json:"path_mtu"`
	// Blackhole: probes above PathMTU vanished without any ICMP error, so
	// path-MTU discovery does not work on this path.
	Blackhole bool `json:"blackhole"`
	// Hop is the router that answered "fragmentation needed" / "packet too
	// big" (invalid when none did), and HopMTU the MTU it named.
	Hop    netip.Addr `json:"-"`
	HopMTU int        `json:"-"`
	// LocalLimit: the local interface MTU, not the path, is the limit.
	LocalLimit bool `json:"local_limit"`
	LocalMTU   int  `json:"local_mtu,omitempty"`
	// RTT is the smallest round-trip time of an echo reply.
	RTT     time.Duration `json:"-"`
	Elapsed time.Duration `json:"-"`
	Rounds  int           `json:"rounds"`
	Probes  int           `json:"probes"`
	// Lost counts probes no larger than PathMTU that were not answered
	// (random loss, not size).
	Lost int `json:"lost_small_probes"`
}

// commonMTUs are link MTUs met in practice; the first round probes each and
// the size just above, so that a path with one of them is settled at once.
var commonMTUs = []int{
	576, 1280, 1360, 1380, 1400, 1420, 1440, 1450, 1460, 1472, 1480, 1492,
	1500, 4464, 9000,
}

// Search finds the path MTU through p.
func Search(ctx context.Context, p Prober, opts Options) (Result, error) {
	opts = opts.withDefaults()
	start := time.Now()
	fam := p.Family()
	res := Result{Family: fam, LocalMTU: p.LocalMTU()}

	maxSize := 65535
	if res.LocalMTU > 0 {
		maxSize = res.LocalMTU
	}
	if opts.Max > 0 && opts.Max < maxSize {
		maxSize = opts.Max
	}
	minSize := fam.MinMTU()
	if maxSize < minSize {
		return res, fmt.Errorf("largest probe %d bytes is below the %s minimum MTU %d", maxSize, fam, minSize)
	}

	s := &searchState{hi: maxSize + 1, hiCause: causeCap, limit: maxSize + 1, fails: map[int]hiCause{}}
	wait := Wait{Max: opts.Timeout, Min: opts.MinRoundWait, RTTFactor: 3}

	sizes := firstRound(minSize, maxSize)
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		answers, err := p.Round(ctx, sizes, wait)
		res.Rounds++
		res.Probes += len(sizes)
		if err != nil {
			return res, err
		}
		if opts.Trace != nil {
			opts.Trace(res.Rounds, answers)
		}
		for _, a := range answers {
			if a.Outcome == Reply && (res.RTT == 0 || a.RTT < res.RTT) {
				res.RTT = a.RTT
			}
		}
		if err := s.absorb(answers); err != nil {
			return res, err
		}
		switch {
		case s.lo == 0:
			// Not even the smallest probe came back: ask once more.
			if s.emptyRounds++; s.emptyRounds >= 2 {
				return res, fmt.Errorf("no echo reply to %d-byte probes: the host is down, unreachable, or drops ICMP echo requests", minSize)
			}
			sizes = []int{minSize, minSize}
		case s.hi == s.lo+1 && s.hiCause == causeSilence && !s.confirmed:
			// A boundary that rests on silence alone may be random loss:
			// send the size again, twice, before calling it a black hole.
			s.confirmed = true
			sizes = []int{s.hi, s.hi, s.lo}
		default:
			sizes = s.narrow(opts.Spread)
		}
		if len(sizes) == 0 {
			break
		}
		if res.Rounds >= 12 {
			return res, fmt.Errorf("path MTU search did not converge after %d rounds (between %d and %d bytes): the path loses too many probes", res.Rounds, s.lo, s.hi)
		}
	}

	res.PathMTU = s.lo
	res.Lost = s.lostSmall
	res.Hop, res.HopMTU = s.hop, s.hopMTU
	res.Blackhole = s.hiCause == causeSilence
	res.LocalLimit = s.hiCause == causeLocal ||
		(s.hiCause == causeCap && opts.Max == 0 && res.LocalMTU > 0 && s.lo == maxSize)
	res.Elapsed = time.Since(start)
	return res, nil
}

// Why the smallest failing size failed, weakest evidence first.
type hiCause int

const (
	causeCap     hiCause = iota // nothing larger was allowed to be probed
	causeSilence                // the probe vanished
	causeLocal                  // the local kernel refused it
	causeTooBig                 // a router said so
)

type searchState struct {
	lo      int     // largest size echoed
	hi      int     // smallest size known not to pass (derived from fails)
	hiCause hiCause // why hi fails
	limit   int     // one above the largest size we may probe
	// fails holds every size that did not pass and the strongest reason;
	// sizes at or below lo are loss, not size, and are ignored.
	fails     map[int]hiCause
	lostSmall int
	hop       netip.Addr
	hopMTU    int
	hint      int  // an MTU named by a router, to verify
	confirmed bool // the current silent boundary was probed twice more
	// emptyRounds counts rounds in which nothing was echoed.
	emptyRounds int
	unreachable *Answer
}

func (s *searchState) absorb(answers []Answer) error {
	// Replies first: they decide which silences are size and which are loss.
	for _, a := range answers {
		if a.Outcome == Reply && a.Size > s.lo {
			s.lo = a.Size
		}
	}
	// A size that vanished before and now passed shows that its round lost
	// probes for reasons other than size (neighbour discovery on a cold
	// path, congestion): forget every earlier silence and let the next
	// rounds ask again.
	contradicted := false
	for size, c := range s.fails {
		if c == causeSilence && size <= s.lo {
			contradicted = true
		}
	}
	if contradicted {
		for size, c := range s.fails {
			if c == causeSilence {
				delete(s.fails, size)
			}
		}
	}
	fail := func(size int, c hiCause) {
		if old, ok := s.fails[size]; !ok || c > old {
			s.fails[size] = c
		}
	}
	for _, a := range answers {
		switch a.Outcome {
		case TooBig:
			fail(a.Size, causeTooBig)
			if a.MTU > 0 && (s.hopMTU == 0 || a.MTU <= s.hopMTU) {
				s.hop, s.hopMTU = a.From, a.MTU
			}
			if a.MTU > s.lo && a.MTU < a.Size {
				s.hint = a.MTU
			}
		case LocalTooBig:
			fail(a.Size, causeLocal)
		case Lost:
			if a.Size <= s.lo {
				s.lostSmall++
				continue
			}
			fail(a.Size, causeSilence)
		case Unreachable:
			if s.unreachable == nil {
				a := a
				s.unreachable = &a
			}
		}
	}
	if s.lo == 0 && s.unreachable != nil {
		u := s.unreachable
		return fmt.Errorf("destination unreachable: %s (ICMP error from %s)", u.Detail, u.From)
	}
	oldHi := s.hi
	s.hi, s.hiCause = s.limit, causeCap
	for size, c := range s.fails {
		if size > s.lo && (size < s.hi || size == s.hi && c > s.hiCause) {
			s.hi, s.hiCause = size, c
		}
	}
	if s.hi != oldHi || s.hi > s.lo+1 {
		s.confirmed = false
	}
	return nil
}

// narrow picks the sizes of the next round strictly between lo and hi.
func (s *searchState) narrow(spread int) []int {
	gap := s.hi - s.lo - 1
	if gap <= 0 {
		return nil
	}
	var sizes []int
	add := func(v int) {
		if v > s.lo && v < s.hi {
			for _, x := range sizes {
				if x == v {
					return
				}
			}
			sizes = append(sizes, v)
		}
	}
	if s.hint > s.lo && s.hint < s.hi {
		// A router named the MTU: verify it and the size above.
		add(s.hint)
		add(s.hint + 1)
		s.hint = 0
		if len(sizes) > 0 {
			return sizes
		}
	}
	if gap <= spread {
		for v := s.lo + 1; v < s.hi; v++ {
			add(v)
		}
		return sizes
	}
	// Evenly spaced sizes cut the gap into spread+1 parts.
	for i := 1; i <= spread; i++ {
		add(s.lo + int(int64(gap+1)*int64(i)/int64(spread+1)))
	}
	return sizes
}

// firstRound lists the sizes of the opening burst: the minimum, each common
// MTU in range and the size just above it, the maximum, and a spread of
// sizes between them so that an uncommon MTU is already bracketed closely.
func firstRound(minSize, maxSize int) []int {
	seen := map[int]bool{}
	var sizes []int
	add := func(v int) {
		if v >= minSize && v <= maxSize && !seen[v] {
			seen[v] = true
			sizes = append(sizes, v)
		}
	}
	add(minSize)
	for _, m := range commonMTUs {
		add(m)
		add(m + 1)
	}
	add(maxSize)
	// Spread: 16 steps across [minSize, min(maxSize, 1500)] and, for jumbo
	// paths, 8 steps above 1500.
	top := maxSize
	if top > 1500 {
		top = 1500
	}
	for i := 1; i < 16; i++ {
		add(minSize + (top-minSize)*i/16)
	}
	if maxSize > 1500 {
		for i := 1; i < 8; i++ {
			add(1500 + (maxSize-1500)*i/8)
		}
	}
	return sizes
}
