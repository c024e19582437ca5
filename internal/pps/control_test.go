package pps

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var sampleControls = []*Control{
	{Version: Version, Type: MsgHello, Nonce: [16]byte{1, 2, 3}, Params: Params{RatePPS: 100000, Size: 18, Duration: 10 * time.Second, Flows: 4, Timeout: time.Second}},
	{Version: Version, Type: MsgAccept, Nonce: [16]byte{9}, Session: 77, Params: Params{RatePPS: 0, Size: 1400, Duration: 300 * time.Second, Flows: 64, Timeout: 10 * time.Second}, Limits: Limits{MaxDuration: 300 * time.Second, MaxFlows: 64, MaxSize: MaxSize, MaxTimeout: 10 * time.Second}},
	{Version: Version, Type: MsgRefuse, Nonce: [16]byte{4}, Reason: "busy: 16 sessions running, try later"},
	{Version: Version, Type: MsgFinish, Nonce: [16]byte{5}, Session: 0xffffffff},
	{Version: Version, Type: MsgReport, Nonce: [16]byte{6}, Session: 3, Report: ServerReport{Received: 1e9, Echoed: 999, CPUUser: 3 * time.Second, CPUSystem: time.Millisecond, Elapsed: 11 * time.Second}},
	{Version: Version, Type: MsgHello, Nonce: [16]byte{7}, Params: Params{Size: 18, Duration: time.Second, Flows: 1, Timeout: time.Second, OneWay: true}},
	{Version: Version, Type: MsgAccept, Nonce: [16]byte{8}, Session: 5, Params: Params{Size: 18, Duration: time.Second, Flows: 1, Timeout: time.Second, OneWay: true}, Limits: Limits{MaxDuration: time.Second, MaxFlows: 1, MaxSize: 18, MaxTimeout: time.Second}},
	{Version: Version, Type: MsgSeries, Nonce: [16]byte{10}, Session: 5, SeriesFrom: 23},
	{Version: Version, Type: MsgSeriesData, Nonce: [16]byte{11}, Session: 5, SeriesFrom: 0, SeriesTotal: 301, Series: fullPage()},
	{Version: Version, Type: MsgSeriesData, Nonce: [16]byte{12}, Session: 5, SeriesFrom: 299, SeriesTotal: 300},
}

func fullPage() []uint64 {
	s := make([]uint64, seriesPage)
	for i := range s {
		s[i] = uint64(i) * 1000003
	}
	return s
}

// An ACCEPT from a server that predates one-way tests ends after the limits;
// the client must read it as "not one-way".
func TestAcceptWithoutFlags(t *testing.T) {
	t.Parallel()
	c := *sampleControls[len(sampleControls)-4]
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseControl(b[:len(b)-1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Params.OneWay {
		t.Error("an accept without the flags byte reads as one-way")
	}
	got.Params.OneWay = true
	if !reflect.DeepEqual(got, &c) {
		t.Errorf("got %+v, want %+v but for the flag", got, &c)
	}
}

func TestSeriesDataRejectsOversizedPage(t *testing.T) {
	t.Parallel()
	c := &Control{Version: Version, Type: MsgSeriesData, Series: make([]uint64, seriesPage+1)}
	if _, err := c.Marshal(); err == nil {
		t.Error("marshalled a page larger than seriesPage")
	}
	ok, _ := (&Control{Version: Version, Type: MsgSeriesData, Series: make([]uint64, 2)}).Marshal()
	ok[headerLen+12] = seriesPage + 1
	if _, err := ParseControl(ok); !errors.Is(err, ErrMalformed) {
		t.Errorf("page count %d: %v, want ErrMalformed", seriesPage+1, err)
	}
	ok[headerLen+12] = 3 // claims 3 counts, holds 2
	if _, err := ParseControl(ok); !errors.Is(err, ErrMalformed) {
		t.Errorf("short page: %v, want ErrMalformed", err)
	}
}

func TestControlRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range sampleControls {
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if (c.Type == MsgHello || c.Type == MsgFinish || c.Type == MsgSeries) && len(b) != requestLen {
			t.Errorf("%v is %d bytes, requests are padded to %d", c.Type, len(b), requestLen)
		}
		if c.Type != MsgHello && c.Type != MsgFinish && c.Type != MsgSeries && len(b) > requestLen {
			t.Errorf("reply %v is %d bytes, larger than a request (%d): amplification", c.Type, len(b), requestLen)
		}
		got, err := ParseControl(b)
		if err != nil {
			t.Fatalf("%v: %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%v round trip:\n got %+v\nwant %+v", c.Type, got, c)
		}
	}
}

func TestParseControlRejects(t *testing.T) {
	t.Parallel()
	hello, _ := sampleControls[0].Marshal()
	refuse, _ := sampleControls[2].Marshal()
	bad := func(b []byte, i int, v byte) []byte {
		b = append([]byte(nil), b...)
		b[i] = v
		return b
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"probe":          []byte("pd0123456789abcdef"),
		"short header":   hello[:10],
		"short hello":    hello[:100],
		"unknown type":   bad(hello, 5, 99),
		"long reason":    bad(refuse, headerLen, 200),
		"truncated why":  refuse[:len(refuse)-3],
		"bad utf8":       bad(refuse, headerLen+1, 0xff),
		"short accept":   func() []byte { b, _ := sampleControls[1].Marshal(); return b[:30] }(),
		"short report":   func() []byte { b, _ := sampleControls[4].Marshal(); return b[:40] }(),
		"finish no body": func() []byte { b, _ := sampleControls[3].Marshal(); return b[:headerLen] }(),
	} {
		if c, err := ParseControl(b); err == nil {
			t.Errorf("%s: accepted as %+v", name, c)
		} else if !errors.Is(err, ErrNotControl) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v is neither ErrNotControl nor ErrMalformed", name, err)
		}
	}
	// Another version: only the header is parsed, so the server can answer.
	c, err := ParseControl(bad(hello, 4, 9))
	if err != nil || c.Version != 9 || c.Type != MsgHello {
		t.Errorf("version 9 hello: %+v, %v", c, err)
	}
}

func TestLimitsCheck(t *testing.T) {
	t.Parallel()
	ok := Params{RatePPS: 1000, Size: 18, Duration: 10 * time.Second, Flows: 1, Timeout: time.Second}
	with := func(f func(*Params)) Params { p := ok; f(&p); return p }
	for _, tc := range []struct {
		p    Params
		want string // "" = accepted
	}{
		{ok, ""},
		{with(func(p *Params) { p.Size = 17 }), "size 17"},
		{with(func(p *Params) { p.Size = MaxSize + 1 }), "size 65508"},
		{with(func(p *Params) { p.Flows = 0 }), "0 flows"},
		{with(func(p *Params) { p.Flows = 65 }), "65 flows"},
		{with(func(p *Params) { p.Duration = 0 }), "duration"},
		{with(func(p *Params) { p.Timeout = 0 }), "timeout"},
		{with(func(p *Params) { p.Timeout = 11 * time.Second }), "timeout"},
		{with(func(p *Params) { p.RatePPS = 0 }), ""},
	} {
		_, err := DefaultLimits().Check(tc.p)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v refused: %v", tc.p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: err %v, want one mentioning %q", tc.p, err, tc.want)
		}
	}
	p, err := DefaultLimits().Check(with(func(p *Params) { p.Duration = time.Hour }))
	if err != nil || p.Duration != DefaultLimits().MaxDuration {
		t.Errorf("an hour: %v, %v; want capped at %v", p.Duration, err, DefaultLimits().MaxDuration)
	}
}

// FuzzParseControl feeds arbitrary datagrams to the parser the server runs
// on untrusted input. It must never panic; whatever it accepts must
// re-marshal to something it parses to the same message, and a request it
// accepts must pass or fail Limits.Check without panicking.
func FuzzParseControl(f *testing.F) {
	for _, c := range sampleControls {
		b, _ := c.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseControl(b)
		if err != nil {
			return
		}
		if c.Type == MsgHello {
			_, _ = DefaultLimits().Check(c.Params)
		}
		if c.Version != Version {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("parsed %+v but cannot marshal it: %v", c, err)
		}
		again, err := ParseControl(out)
		if err != nil {
			t.Fatalf("re-parse of %+v: %v", c, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed message:\n%+v\n%+v", c, again)
		}
	})
}
