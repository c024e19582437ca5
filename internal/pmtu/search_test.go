package pmtu

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// pathCase is a path to search: what the test expects, whichever prober
// (fake or real) walks it.
type pathCase struct {
	name      string
	family    Family
	mtu       int           // of the bottleneck link
	blackhole bool          // the router's ICMP errors are dropped
	localMTU  int           // of the client's interface (0: 1500)
	rtt       time.Duration // added by the path (the fake answers at 100 ms when 0)
}

func (c pathCase) local() int {
	if c.localMTU == 0 {
		return 1500
	}
	return c.localMTU
}

var pathCases = []pathCase{
	// The must-show cases: 100 ms RTT.
	{name: "v4-1400", family: IPv4, mtu: 1400, rtt: 100 * time.Millisecond},
	{name: "v4-1492", family: IPv4, mtu: 1492, rtt: 100 * time.Millisecond},
	{name: "v4-1400-blackhole", family: IPv4, mtu: 1400, blackhole: true, rtt: 100 * time.Millisecond},
	{name: "v6-1400-rtt", family: IPv6, mtu: 1400, rtt: 100 * time.Millisecond},
	{name: "v6-1400-blackhole-rtt", family: IPv6, mtu: 1400, blackhole: true, rtt: 100 * time.Millisecond},
	{name: "v4-1337-uncommon", family: IPv4, mtu: 1337},
	{name: "v4-1337-uncommon-blackhole", family: IPv4, mtu: 1337, blackhole: true},
	{name: "v4-576", family: IPv4, mtu: 576},
	{name: "v4-1500-clean", family: IPv4, mtu: 1500},
	{name: "v6-1400", family: IPv6, mtu: 1400},
	{name: "v6-1400-blackhole", family: IPv6, mtu: 1400, blackhole: true},
	{name: "v6-1280", family: IPv6, mtu: 1280},
	{name: "v6-1492", family: IPv6, mtu: 1492},
}

// routerAddr is the address the router answers from (the lab's router on
// the client side).
func routerAddr(f Family) netip.Addr {
	if f == IPv6 {
		return netip.MustParseAddr("2001:db8:c::1")
	}
	return netip.MustParseAddr("192.0.2.1")
}

// testSearch runs one path case over a prober made by newProber and checks
// what Search reports. The same body runs over the fake and the real prober.
func testSearch(t *testing.T, c pathCase, p Prober) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Search(ctx, p, Options{Trace: func(r int, as []Answer) {
		var b strings.Builder
		for _, a := range as {
			fmt.Fprintf(&b, " %d:%v", a.Size, a.Outcome)
			if a.Outcome == Reply {
				fmt.Fprintf(&b, "(%v)", a.RTT.Round(time.Millisecond))
			}
		}
		t.Logf("round %d:%s", r, b.String())
	}})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	want := c.mtu
	if c.local() < want {
		want = c.local()
	}
	if res.PathMTU != want {
		t.Errorf("PathMTU = %d, want %d (result %+v)", res.PathMTU, want, res)
	}
	if res.Family != c.family {
		t.Errorf("Family = %v, want %v", res.Family, c.family)
	}
	pathLimited := c.mtu < c.local()
	if got, want := res.Blackhole, c.blackhole && pathLimited; got != want {
		t.Errorf("Blackhole = %v, want %v (result %+v)", got, want, res)
	}
	if pathLimited && !c.blackhole {
		if res.Hop != routerAddr(c.family) || res.HopMTU != c.mtu {
			t.Errorf("hop = %v naming MTU %d, want %v naming %d", res.Hop, res.HopMTU, routerAddr(c.family), c.mtu)
		}
	} else if res.Hop.IsValid() {
		t.Errorf("hop = %v naming %d, want none", res.Hop, res.HopMTU)
	}
	if !pathLimited && !res.LocalLimit {
		t.Errorf("LocalLimit = false, want true: the interface MTU %d is the limit", c.local())
	}
	if res.Rounds > 6 {
		t.Errorf("took %d rounds, want at most 6", res.Rounds)
	}
	return res
}

func TestSearchFake(t *testing.T) {
	t.Parallel()
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c)
			res := testSearch(t, c, f)
			t.Logf("%d rounds, %d probes, virtual time %v", res.Rounds, res.Probes, f.clock)
			// Virtual time at 100 ms RTT: the budgets of the issue.
			budget := 2 * time.Second
			if c.blackhole {
				budget = 5 * time.Second
			}
			if f.clock > budget {
				t.Errorf("virtual time %v at 100 ms RTT, want under %v", f.clock, budget)
			}
		})
	}
}

// A probe lost at random must not be taken for a black hole boundary.
func TestSearchFakeRandomLoss(t *testing.T) {
	t.Parallel()
	c := pathCase{family: IPv4, mtu: 1400}
	for _, lose := range []int{1400, 1401, 1280, 576} {
		f := newFake(c)
		f.loseOnce = map[int]bool{lose: true}
		res := testSearch(t, c, f)
		if lose < 1400 && res.Lost == 0 {
			t.Errorf("lost probe at %d not counted: %+v", lose, res)
		}
	}
	// Black hole path with the boundary probe lost once more: still 1400.
	c = pathCase{family: IPv4, mtu: 1400, blackhole: true}
	f := newFake(c)
	f.loseOnce = map[int]bool{1400: true}
	testSearch(t, c, f)
}

func TestSearchFakeNoReply(t *testing.T) {
	t.Parallel()
	f := newFake(pathCase{family: IPv4, mtu: 1500})
	f.dead = true
	_, err := Search(context.Background(), f, Options{})
	if err == nil {
		t.Fatal("Search on a silent host succeeded")
	}
	t.Log(err)
	f = newFake(pathCase{family: IPv4, mtu: 1500})
	f.unreachable = true
	_, err = Search(context.Background(), f, Options{})
	if err == nil {
		t.Fatal("Search on an unreachable host succeeded")
	}
	t.Log(err)
}

func TestSearchMaxCaps(t *testing.T) {
	t.Parallel()
	f := newFake(pathCase{family: IPv4, mtu: 1500})
	res, err := Search(context.Background(), f, Options{Max: 1450})
	if err != nil {
		t.Fatal(err)
	}
	if res.PathMTU != 1450 || res.LocalLimit || res.Blackhole {
		t.Errorf("with Max 1450 on a 1500 path: %+v, want PathMTU 1450, no local limit, no black hole", res)
	}
	for _, s := range f.sizes {
		if s > 1450 {
			t.Errorf("probed %d bytes above Max 1450", s)
		}
	}
}

func TestSearchJumbo(t *testing.T) {
	t.Parallel()
	c := pathCase{family: IPv4, mtu: 8000, localMTU: 9000}
	testSearch(t, c, newFake(c))
	c = pathCase{family: IPv6, mtu: 9000, localMTU: 9000}
	testSearch(t, c, newFake(c))
}

// fake is a Prober over a modelled path: client (interface MTU local) —
// router — bottleneck link (mtu) — host, 100 ms round trip. It keeps a
// virtual clock so that tests can check time budgets without sleeping.
type fake struct {
	c           pathCase
	rtt         time.Duration
	clock       time.Duration
	loseOnce    map[int]bool
	dead        bool
	unreachable bool
	// band of sizes that always vanish, though sizes above pass
	holeLo, holeHi int
	// random loss of probes or answers
	lossRate float64
	rng      *rand.Rand
	sizes    []int
}

func newFake(c pathCase) *fake {
	if c.rtt == 0 {
		c.rtt = 100 * time.Millisecond
	}
	return &fake{c: c, rtt: c.rtt}
}

func (f *fake) Family() Family { return f.c.family }
func (f *fake) LocalMTU() int  { return f.c.local() }
func (f *fake) Close() error   { return nil }

func (f *fake) Round(_ context.Context, sizes []int, w Wait) ([]Answer, error) {
	out := make([]Answer, len(sizes))
	pending := false
	for i, s := range sizes {
		f.sizes = append(f.sizes, s)
		a := Answer{Size: s}
		switch {
		case s > f.c.local():
			a.Outcome, a.MTU = LocalTooBig, f.c.local()
		case f.unreachable:
			a.Outcome, a.Detail, a.From, a.RTT = Unreachable, "host unreachable", routerAddr(f.c.family), f.rtt/2
		case f.rng != nil && f.rng.Float64() < f.lossRate:
			a.Outcome = Lost
			pending = true
		case s >= f.holeLo && s <= f.holeHi:
			a.Outcome = Lost
			pending = true
		case f.dead || f.loseOnce[s]:
			delete(f.loseOnce, s)
			a.Outcome = Lost
			pending = true
		case s > f.c.mtu && f.c.blackhole:
			a.Outcome = Lost
			pending = true
		case s > f.c.mtu:
			a.Outcome, a.MTU, a.From, a.RTT = TooBig, f.c.mtu, routerAddr(f.c.family), f.rtt/2
		default:
			a.Outcome, a.RTT = Reply, f.rtt
		}
		out[i] = a
	}
	// The round lasts until every probe is answered, or as a real prober
	// would wait for the missing ones.
	replied := false
	for _, a := range out {
		replied = replied || a.Outcome == Reply
	}
	switch {
	case !pending:
		f.clock += f.rtt
	case replied:
		f.clock += w.Deadline(f.rtt)
	default:
		f.clock += w.Deadline(0)
	}
	return out, nil
}

// A cold path (neighbour discovery still running) loses a whole first round
// of echo requests while the router's errors arrive: the search must not
// take those silences for a black hole.
func TestSearchFakeColdStart(t *testing.T) {
	t.Parallel()
	for _, c := range []pathCase{{family: IPv6, mtu: 1400}, {family: IPv4, mtu: 1400, blackhole: true}} {
		f := newFake(c)
		f.loseOnce = map[int]bool{}
		for _, s := range firstRound(c.family.MinMTU(), 1500) {
			if s <= c.mtu {
				f.loseOnce[s] = true
			}
		}
		res := testSearch(t, c, f)
		t.Logf("%+v", res)
	}
}

// Through a tunnel over a black hole, inner packets whose outer packets
// would just exceed the path MTU vanish (outer Don't-Fragment), while larger
// ones pass because the kernel fragments the outer packets locally. The
// search must report the largest size below which everything passes, and
// the band.
func TestSearchFakeHole(t *testing.T) {
	t.Parallel()
	c := pathCase{family: IPv4, mtu: 1500}
	f := newFake(c)
	f.holeLo, f.holeHi = 1349, 1448
	res, err := Search(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PathMTU != 1348 || !res.Blackhole || res.LargestPassed != 1500 || res.HoleFrom != 1349 {
		t.Errorf("got %+v, want PathMTU 1348, black hole, hole from 1349, largest passed 1500", res)
	}
	t.Logf("%d rounds, %d probes, virtual time %v", res.Rounds, res.Probes, f.clock)
	if res.Rounds > 6 {
		t.Errorf("%d rounds", res.Rounds)
	}
}

// Random loss (6 % of probes or their answers, about 3 % each way) must
// rarely change the answer. Seeded, so the figures are reproducible.
func TestSearchFakeLossy(t *testing.T) {
	t.Parallel()
	for _, c := range []pathCase{
		{family: IPv4, mtu: 1400},
		{family: IPv4, mtu: 1400, blackhole: true},
		{family: IPv4, mtu: 1337, blackhole: true},
	} {
		const runs = 400
		wrong, failed, rounds := 0, 0, 0
		var worst time.Duration
		for i := range runs {
			f := newFake(c)
			f.lossRate, f.rng = 0.06, rand.New(rand.NewSource(int64(i)))
			res, err := Search(context.Background(), f, Options{})
			switch {
			case err != nil:
				failed++
			case res.PathMTU != c.mtu || res.Blackhole != c.blackhole:
				wrong++
			}
			rounds += res.Rounds
			worst = max(worst, f.clock)
		}
		t.Logf("mtu %d blackhole %v: %d/%d wrong, %d failed, %.1f rounds on average, slowest %v at 100 ms RTT",
			c.mtu, c.blackhole, wrong, runs, failed, float64(rounds)/runs, worst)
		if wrong+failed > runs/50 {
			t.Errorf("%d wrong and %d failed of %d runs at 6 %% loss, want under 2 %%", wrong, failed, runs)
		}
	}
}
