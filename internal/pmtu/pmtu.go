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
//	then:    re-ask (twice) sizes that vanished below an echoed size —
//	         random loss, or a band of sizes the path drops (a "hole");
//	         or the MTU a router named and the size above it;
//	         or the sizes between lo and hi (all of them if few);
//	last:    confirm a boundary that rests on silence alone
//
// Each round waits until every probe is answered or, once echo replies show
// the round-trip time, for max(3 × RTT, 300 ms), so that a black hole costs
// a few round trips rather than timeouts.
//
// Search is independent of sockets: it drives a Prober, which the real
// raw-socket prober (NewProber) and the tests' fake both implement.
//
// State: the prober's socket is closed by Close. The kernel itself records
// the MTU named by a router's ICMP error as a route exception for the
// destination (`ip route get DST` shows "mtu N", expiring after
// net.ipv4.route.mtu_expires / net.ipv6.route.mtu_expires), as it would for
// any traffic; probes ignore that cache (IP_PMTUDISC_PROBE).
package pmtu

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
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
		return overhead.MinIPv6MTU
	}
	return overhead.MinIPv4LinkMTU
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
// answered, at Max, or — once the round-trip time is known from an echo
// reply of this round (else from RTT) — at max(RTTFactor × the slowest
// reply, Min) after the round started. The round's own replies win over RTT
// because the first round on a cold path (ARP or neighbour discovery) is
// slower than the path.
type Wait struct {
	Max       time.Duration
	Min       time.Duration
	RTTFactor int
	// RTT is the slowest echo of the last round that had replies (0: none
	// yet), so that a round whose probes all vanish need not wait for Max.
	RTT time.Duration
}

// Deadline is how long after its start a round ends, given the slowest
// echo reply seen in it so far (0 if none).
func (w Wait) Deadline(slowest time.Duration) time.Duration {
	rtt := slowest
	if rtt == 0 {
		rtt = w.RTT
	}
	if rtt == 0 {
		return w.Max
	}
	return min(max(time.Duration(w.RTTFactor)*rtt, w.Min), w.Max)
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
	// Timeout is the longest wait for one round of answers (0:
	// DefaultTimeout; pmtu's --timeout takes TimeoutRange):
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
		o.Timeout = DefaultTimeout
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
	// PathMTU is the largest probe size (whole IP packet, bytes) that was
	// echoed with every smaller probed size echoed too.
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
	// Lost counts probes of sizes that passed at another try (random loss,
	// not size).
	Lost int `json:"lost_small_probes"`
	// LargestPassed, when above PathMTU, is the largest size that was
	// echoed although sizes from HoleFrom up vanished: the path loses a
	// band of sizes above its MTU but carries larger packets (fragmented).
	LargestPassed int `json:"largest_passed,omitempty"`
	HoleFrom      int `json:"hole_from,omitempty"`
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

	maxSize := overhead.MaxIPPacket
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

	s := &searchState{limit: maxSize + 1, passed: map[int]bool{}, fails: map[int]hiCause{},
		lost: map[int]int{}, holes: map[int]bool{}}
	s.derive()
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
		var slowest time.Duration
		for _, a := range answers {
			if a.Outcome == Reply {
				if res.RTT == 0 || a.RTT < res.RTT {
					res.RTT = a.RTT
				}
				slowest = max(slowest, a.RTT)
			}
		}
		if slowest > 0 {
			wait.RTT = slowest
		}
		if err := s.absorb(answers); err != nil {
			return res, err
		}
		if s.lo == 0 {
			// Not even the smallest probe came back: ask once more.
			if s.emptyRounds++; s.emptyRounds >= 2 {
				return res, fmt.Errorf("no echo reply to %d-byte probes: the host is down, unreachable, or drops ICMP echo requests", minSize)
			}
			sizes = []int{minSize, minSize}
		} else if sizes = s.recheck(2 * opts.Spread); len(sizes) > 0 {
			// Sizes vanished although larger ones passed: random loss, or
			// a hole in the sizes the path carries. Ask again.
		} else if s.hi == s.lo+1 && s.hiCause == causeSilence && !s.confirmed && !s.holes[s.hi] {
			// A boundary that rests on silence alone may be random loss:
			// send the size again, twice, before calling it a black hole.
			s.confirmed = true
			sizes = []int{s.hi, s.hi, s.lo}
		} else {
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
	for size, n := range s.lost {
		if s.passed[size] {
			res.Lost += n
		}
	}
	for size := range s.passed {
		res.LargestPassed = max(res.LargestPassed, size)
	}
	if res.LargestPassed > res.PathMTU {
		res.HoleFrom = s.hi
	} else {
		res.LargestPassed = 0
	}
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

// searchState is the evidence gathered so far. The path MTU is the largest
// size below which everything passes: normally lo, the largest size echoed,
// with hi the smallest size that failed above it. A path can also drop a
// band of sizes while larger ones pass — a tunnel whose outer packets carry
// Don't-Fragment into a black hole loses inner packets just above its MTU,
// yet fragments bigger ones — so a size that vanished below an echoed one is
// asked again, and one that vanishes three times is a hole that caps the
// search.
type searchState struct {
	limit  int             // one above the largest size we may probe
	passed map[int]bool    // sizes echoed at least once
	fails  map[int]hiCause // sizes never echoed, with the strongest reason
	lost   map[int]int     // times each size vanished
	holes  map[int]bool    // sizes that vanished 3 times below an echoed size

	lo      int     // largest size echoed below the first hole
	hi      int     // smallest size above lo known not to pass
	hiCause hiCause // why hi fails

	hop       netip.Addr
	hopMTU    int
	hint      int  // an MTU named by a router, to verify
	confirmed bool // the current silent boundary was probed twice more
	// emptyRounds counts rounds in which nothing was echoed.
	emptyRounds int
	unreachable *Answer
}

func (s *searchState) absorb(answers []Answer) error {
	contradicted := false
	for _, a := range answers {
		switch a.Outcome {
		case Reply:
			if s.fails[a.Size] == causeSilence && s.lost[a.Size] > 0 {
				contradicted = true
			}
			s.passed[a.Size] = true
			delete(s.fails, a.Size)
			delete(s.holes, a.Size)
		case TooBig:
			s.fail(a.Size, causeTooBig)
			if a.MTU > 0 && (s.hopMTU == 0 || a.MTU <= s.hopMTU) {
				s.hop, s.hopMTU = a.From, a.MTU
			}
			if a.MTU < a.Size {
				s.hint = a.MTU
			}
		case LocalTooBig:
			s.fail(a.Size, causeLocal)
		case Lost:
			s.lost[a.Size]++
			s.fail(a.Size, causeSilence)
		case Unreachable:
			if s.unreachable == nil {
				a := a
				s.unreachable = &a
			}
		}
	}
	top := s.maxPassed()
	if contradicted {
		// A size that vanished before has now passed: its round lost
		// probes for reasons other than size (neighbour discovery on a
		// cold path, congestion). Forget the other single silences above
		// the echoed sizes; narrowing asks for them again.
		for size, c := range s.fails {
			if c == causeSilence && s.lost[size] == 1 && size > top {
				delete(s.fails, size)
			}
		}
	}
	// A size that vanished three times, never passed, and lies below an
	// echoed size is a hole. (Three: at 5 % round-trip loss, two losses of
	// one size in a row happen too often among a dozen re-asked sizes.)
	for size, c := range s.fails {
		if c == causeSilence && size < top && s.lost[size] >= 3 && !s.passed[size] {
			s.holes[size] = true
		}
	}
	oldHi := s.hi
	s.derive()
	if s.lo == 0 && s.unreachable != nil {
		u := s.unreachable
		return fmt.Errorf("destination unreachable: %s (ICMP error from %s)", u.Detail, u.From)
	}
	if s.hi != oldHi || s.hi > s.lo+1 {
		s.confirmed = false
	}
	return nil
}

func (s *searchState) fail(size int, c hiCause) {
	if s.passed[size] {
		return
	}
	if old, ok := s.fails[size]; !ok || c > old {
		s.fails[size] = c
	}
}

func (s *searchState) maxPassed() int {
	top := 0
	for size := range s.passed {
		top = max(top, size)
	}
	return top
}

// derive recomputes lo, hi and hiCause from the evidence.
func (s *searchState) derive() {
	ceiling, cause := s.limit, causeCap
	for size := range s.holes {
		if size < ceiling {
			ceiling, cause = size, causeSilence
		}
	}
	s.lo = 0
	for size := range s.passed {
		if size < ceiling && size > s.lo {
			s.lo = size
		}
	}
	s.hi, s.hiCause = ceiling, cause
	for size, c := range s.fails {
		if size <= s.lo || size > s.hi {
			continue
		}
		// A silence below an echoed size is not evidence until re-asked.
		if c == causeSilence && !s.holes[size] && size < s.maxPassed() {
			continue
		}
		if size < s.hi || c > s.hiCause {
			s.hi, s.hiCause = size, c
		}
	}
}

// recheck lists the sizes that vanished but lie below an echoed size and
// are not yet holes, smallest first (the smallest hole decides), at most n
// of them, each twice.
func (s *searchState) recheck(n int) []int {
	top := s.maxPassed()
	var sizes []int
	for size, c := range s.fails {
		if c == causeSilence && size < top && !s.holes[size] {
			sizes = append(sizes, size)
		}
	}
	sort.Ints(sizes)
	if len(sizes) > n {
		sizes = sizes[:n]
	}
	twice := make([]int, 0, 2*len(sizes))
	for _, size := range sizes {
		twice = append(twice, size, size)
	}
	return twice
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
