package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/big"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/clientseries"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/realnet"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/watch"
)

// boundedFlag is one flag with a range, found by walking the commands.
type boundedFlag struct {
	cmd    []string // command path below the root: "lab", "run"
	name   string
	label  string // as errors name it: "-t/--time"
	typ    string
	lo, hi string
}

// boundedFlags walks every runnable command of the root and returns its
// flags that carry a range (flagvalues.go records one for each numeric,
// duration and size flag).
func boundedFlags(t *testing.T) []boundedFlag {
	t.Helper()
	var out []boundedFlag
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if !c.Runnable() {
			return
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			v := f.Value
			if g, ok := v.(*guardedValue); ok {
				v = g.Value
			}
			b, ok := v.(boundedValue)
			if !ok {
				return
			}
			lo, hi := b.Bounds()
			if lo == "" && hi == "" {
				return
			}
			out = append(out, boundedFlag{strings.Fields(c.CommandPath())[1:], f.Name, flagLabel(f.Name, f.Shorthand), v.Type(), lo, hi})
		})
	}
	walk(newRootCommand())
	return out
}

// outside returns the values just below lo and just above hi of a flag's
// range, as a user would type them.
func (b boundedFlag) outside(t *testing.T) []string {
	t.Helper()
	switch b.typ {
	case "duration":
		step := func(d time.Duration) time.Duration {
			switch {
			case d%time.Second == 0:
				return time.Second
			case d%time.Millisecond == 0:
				return time.Millisecond
			}
			return time.Nanosecond
		}
		lo, err1 := time.ParseDuration(b.lo)
		hi, err2 := time.ParseDuration(b.hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s --%s: bounds %q–%q are not durations", strings.Join(b.cmd, " "), b.name, b.lo, b.hi)
		}
		return []string{(lo - step(lo)).String(), (hi + step(hi)).String()}
	case "float":
		lo, err1 := strconv.ParseFloat(b.lo, 64)
		hi, err2 := strconv.ParseFloat(b.hi, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s --%s: bounds %q–%q are not numbers", strings.Join(b.cmd, " "), b.name, b.lo, b.hi)
		}
		return []string{strconv.FormatFloat(math.Nextafter(lo, math.Inf(-1)), 'g', -1, 64), strconv.FormatFloat(math.Nextafter(hi, math.Inf(1)), 'g', -1, 64)}
	}
	lo, ok1 := new(big.Int).SetString(b.lo, 10)
	hi, ok2 := new(big.Int).SetString(b.hi, 10)
	if !ok1 || !ok2 {
		t.Fatalf("%s --%s: bounds %q–%q are not whole numbers", strings.Join(b.cmd, " "), b.name, b.lo, b.hi)
	}
	one := big.NewInt(1)
	return []string{new(big.Int).Sub(lo, one).String(), new(big.Int).Add(hi, one).String()}
}

// Every bounded flag of every command, through the real binary: the value
// just outside its range is one line naming the flag and exit status 2,
// and leaves no process or lab behind; the values at its bounds pass the
// flag's own check. The flags are found by walking the commands, so a flag
// added later is covered.
func TestFlagBoundsEveryCommand(t *testing.T) {
	flags := boundedFlags(t)
	if len(flags) < 40 {
		t.Fatalf("only %d bounded flags found: the walk is broken", len(flags))
	}
	labsBefore := labsOfBinary()
	t.Run("outside", func(t *testing.T) {
		for _, b := range flags {
			for _, v := range b.outside(t) {
				args := append(append([]string{}, b.cmd...), "--"+b.name+"="+v)
				t.Run(strings.Join(args, " "), func(t *testing.T) {
					t.Parallel()
					r, _ := runLimited(t, 20*time.Second, nil, args...)
					r.mustBeUsageError(t, b.label)
				})
			}
		}
	})
	if p := ownProcesses(); len(p) > 0 {
		t.Errorf("processes of ovpnperf left running: %v", p)
	}
	if after := labsOfBinary(); len(after) > len(labsBefore) {
		t.Errorf("labs made by out-of-range flags: before %v, after %v", labsBefore, after)
	}
	// At the bounds: the flag's own check accepts them.
	root := newRootCommand()
	for _, b := range flags {
		c, _, err := root.Find(b.cmd)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{b.lo, b.hi} {
			if err := c.Flags().Set(b.name, v); err != nil {
				t.Errorf("%s --%s=%s (a bound): %v", strings.Join(b.cmd, " "), b.name, v, err)
			}
		}
	}
	t.Logf("%d bounded flags", len(flags))
}

// ownedFlag is a flag whose range and default a package owns.
type ownedFlag struct {
	cmd, name string
	// lo, hi: the owner's range as the flag records it.
	lo, hi string
	// rng is how the help shows the range ("1–50"); def the flag's
	// default as help shows it ("" when the help shows a rule instead).
	rng, def string
}

func intOwned(cmd, name string, r bounds.Int, def string) ownedFlag {
	return ownedFlag{cmd, name, strconv.Itoa(r.Min), strconv.Itoa(r.Max), r.String(), def}
}

func durOwned(cmd, name string, r bounds.Duration, def string) ownedFlag {
	return ownedFlag{cmd, name, r.Min.String(), r.Max.String(), r.String(), def}
}

// ownedFlags are the flags of a sample, tune's and watch's, and the path's
// MTU, with the values of the package that owns each: experiment (lab run,
// recipe, measure, watch), tune, watch, iperf, labpath.
func ownedFlags() []ownedFlag {
	rep := strconv.Itoa(experiment.DefaultRepeat)
	var out []ownedFlag
	for _, cmd := range []string{"lab run", "measure", "watch"} {
		out = append(out,
			intOwned(cmd, "repeat", experiment.RepeatRange(), rep),
			durOwned(cmd, "time", experiment.SampleTimeRange(), ""),
			durOwned(cmd, "omit", experiment.OmitRange(), ""))
	}
	port := strconv.Itoa(iperf.DefaultPort)
	mtu := bounds.Int{Min: overhead.MinIPv4MTU, Max: overhead.MaxIPPacket}
	out = append(out,
		intOwned("lab run", "parallel", experiment.ParallelRange(), strconv.Itoa(experiment.DefaultParallel)),
		// A port's range is no decision of ovpnperf's: its help need not
		// show it, the default is iperf3's.
		ownedFlag{"measure", "port", "1", "65535", "", port},
		ownedFlag{"watch", "port", "1", "65535", "", port},
		durOwned("watch", "every", watch.EveryRange(), watch.DefaultEvery.String()),
		durOwned("watch", "probe-interval", watch.ProbeIntervalRange(), watch.DefaultProbeInterval.String()),
		intOwned("recipe", "repeat", experiment.RepeatRange(), ""),
		durOwned("recipe", "time", experiment.SampleTimeRange(), ""),
		intOwned("tune", "repeat", tune.RepeatRange(), strconv.Itoa(tune.MinSamples)),
		durOwned("tune", "time", tune.SampleTimeRange(), ""),
		durOwned("tune", "omit", experiment.OmitRange(), ""),
		durOwned("tune", "budget", tune.BudgetRange(), tune.DefaultBudget.String()),
	)
	for _, cmd := range []string{"lab run", "lab up", "recipe", "tune"} {
		out = append(out, intOwned(cmd, "mtu", mtu, ""))
	}
	out = append(out,
		intOwned("probe", "pings", probe.PingsRange(), strconv.Itoa(probe.DefaultPings)),
		durOwned("probe", "iperf3-time", probe.IPerf3DurationRange(), probe.DefaultIPerf3Duration.String()),
		intOwned("advise", "pmtu", rules.PathMTURange(), ""),
		intOwned("lint", "pmtu", rules.PathMTURange(), ""),
		intOwned("advise", "clients", advise.ClientsRange(), strconv.Itoa(advise.DefaultClients)),
		durOwned("pmtu", "timeout", pmtu.TimeoutRange(), pmtu.DefaultTimeout.String()),
		intOwned("pmtu", "max", pmtu.MaxRange(), ""),
		intOwned("exporter", "max-clients", bounds.Int{Min: 1, Max: clientseries.LargestMax}, strconv.Itoa(clientseries.DefaultMax)),
		intOwned("cluster serve", "per-client-max", bounds.Int{Min: 1, Max: clientseries.LargestMax}, strconv.Itoa(clientseries.DefaultMax)),
	)
	return out
}

// The flags whose range and default a package owns take them from it: the
// range the flag checks is the owner's, its help shows that range (and the
// default where it is a value), and the default is the owner's. A literal
// typed again in one command fails here when it differs, and
// TestNoBoundLiterals when it does not.
func TestOwnedFlagsReadTheirOwner(t *testing.T) {
	root := newRootCommand()
	for _, o := range ownedFlags() {
		c, _, err := root.Find(strings.Fields(o.cmd))
		if err != nil {
			t.Fatal(err)
		}
		f := c.Flags().Lookup(o.name)
		if f == nil {
			t.Errorf("%s: no --%s", o.cmd, o.name)
			continue
		}
		v := f.Value
		if g, ok := v.(*guardedValue); ok {
			v = g.Value
		}
		b, ok := v.(boundedValue)
		if !ok {
			t.Errorf("%s --%s: not a bounded flag", o.cmd, o.name)
			continue
		}
		if lo, hi := b.Bounds(); lo != o.lo || hi != o.hi {
			t.Errorf("%s --%s accepts %s–%s; its owner says %s–%s", o.cmd, o.name, lo, hi, o.lo, o.hi)
		}
		if !strings.Contains(f.Usage, o.rng) {
			t.Errorf("%s --%s: help %q does not show the range %s", o.cmd, o.name, f.Usage, o.rng)
		}
		if o.def != "" && f.DefValue != o.def && !strings.Contains(f.Usage, "default "+o.def) {
			t.Errorf("%s --%s: default %q (help %q); its owner says %s", o.cmd, o.name, f.DefValue, f.Usage, o.def)
		}
	}
}

// The --cipher flags default to OpenVPN 2.6's negotiated cipher as
// overhead names it, and no command types the name again.
func TestCipherFlagsReadTheirOwner(t *testing.T) {
	root := newRootCommand()
	for _, cmd := range []string{"measure", "watch", "pmtu"} {
		c, _, err := root.Find(strings.Fields(cmd))
		if err != nil {
			t.Fatal(err)
		}
		f := c.Flags().Lookup("cipher")
		if f == nil {
			t.Fatalf("%s: no --cipher", cmd)
		}
		if f.DefValue != overhead.DefaultCipher && !strings.Contains(f.Usage, "default "+overhead.DefaultCipher) {
			t.Errorf("%s --cipher: default %q, help %q; overhead's default is %s", cmd, f.DefValue, f.Usage, overhead.DefaultCipher)
		}
	}
	fset := token.NewFileSet()
	for _, name := range ownedFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !registersFlag(call, "cipher") {
				return true
			}
			ast.Inspect(call, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING && strings.Contains(l.Value, overhead.DefaultCipher) {
					t.Errorf("%s: --cipher registered with the cipher name typed: take overhead.DefaultCipher", fset.Position(l.Pos()))
				}
				return true
			})
			return true
		})
	}
}

// registersFlag reports whether call registers a flag named name (a
// function of flagvalues.go or a pflag method).
func registersFlag(call *ast.CallExpr, name string) bool {
	fn := ""
	switch x := call.Fun.(type) {
	case *ast.Ident:
		fn = x.Name
	case *ast.SelectorExpr:
		fn = x.Sel.Name
	}
	if !strings.HasSuffix(fn, "Flag") && !strings.HasSuffix(fn, "Var") && !strings.HasSuffix(fn, "VarP") {
		return false
	}
	for _, a := range call.Args {
		if l, ok := a.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, _ := strconv.Unquote(l.Value); s == name {
				return true
			}
		}
	}
	return false
}

// The commands' own checks accept the flags at their bounds, both ends at
// once: lab run's spec (experiment.Spec.Validate), recipe's options, tune's
// setup and measure's and watch's realnet.Spec. Nothing is built.
func TestSampleFlagsAtBoundsPassValidation(t *testing.T) {
	at := func(t *testing.T, c *cobra.Command, args ...string) {
		t.Helper()
		if err := c.ParseFlags(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	rr, tr, or, pr := experiment.RepeatRange(), experiment.SampleTimeRange(), experiment.OmitRange(), experiment.ParallelRange()
	for _, end := range []string{"low", "high"} {
		pick := func(lo, hi string) string {
			if end == "low" {
				return lo
			}
			return hi
		}
		repeat := pick(strconv.Itoa(rr.Min), strconv.Itoa(rr.Max))
		time_ := pick(tr.Min.String(), tr.Max.String())
		omit := pick(or.Min.String(), or.Max.String())
		t.Run(end, func(t *testing.T) {
			var lr labRunOptions
			at(t, labRunCommand(&lr), "--network", "lan", "--repeat", repeat, "--time", time_, "--omit", omit,
				"--parallel", pick(strconv.Itoa(pr.Min), strconv.Itoa(pr.Max)))
			if _, err := lr.buildSpec("lab run"); err != nil {
				t.Errorf("lab run: %v", err)
			}
			var ro recipeOptions
			at(t, recipeCommand(&ro), "--repeat", repeat, "--time", time_)
			if _, err := ro.recipeOptions(); err != nil {
				t.Errorf("recipe: %v", err)
			}
			var to tuneOptions
			tr, ttr := tune.RepeatRange(), tune.SampleTimeRange()
			at(t, tuneCommand(&to), "--repeat", pick(strconv.Itoa(tr.Min), strconv.Itoa(tr.Max)), "--time", pick(ttr.Min.String(), ttr.Max.String()),
				"--omit", omit, "--budget", pick(tune.BudgetRange().Min.String(), tune.BudgetRange().Max.String()))
			if _, err := to.setup(); err != nil {
				t.Errorf("tune: %v", err)
			}
			var mo measureOptions
			at(t, measureCommand(&mo), "--repeat", repeat, "--time", time_, "--omit", omit)
			if err := (realnet.Spec{Repeat: mo.repeat, Duration: mo.duration, Omit: mo.omit, Port: mo.port}).Validate(); err != nil {
				t.Errorf("measure: %v", err)
			}
			var wo watchOptions
			at(t, watchCommand(&wo), "--repeat", repeat, "--time", time_, "--omit", omit,
				"--every", pick(watch.EveryRange().Min.String(), watch.EveryRange().Max.String()))
			if err := (realnet.Spec{Repeat: wo.repeat, Duration: wo.duration, Omit: wo.omit, Port: wo.port}).Validate(); err != nil {
				t.Errorf("watch: %v", err)
			}
			if !watch.EveryRange().Contains(wo.every) || !watch.ProbeIntervalRange().Contains(wo.probe) {
				t.Errorf("watch: --every %v, --probe-interval %v outside watch's ranges", wo.every, wo.probe)
			}
		})
	}
}

// ownedFiles are the commands with the flags of ownedFlags and the files
// that register them for several commands.
var ownedFiles = []string{"cmd_labrun.go", "cmd_measure.go", "cmd_watch.go", "cmd_recipe.go", "cmd_tune.go", "cmd_lab.go", "cmd_probe.go", "cmd_advise.go", "cmd_lint.go", "cmd_pmtu.go", "cmd_exporter.go", "cmd_cluster_serve.go", "sampleflags.go", "pathflags.go"}

// A number typed where a bound or default belongs: a range in help text
// ("1–50", "1s–300s").
var rangeInText = regexp.MustCompile(`[0-9][a-zA-Z]*\s*[–-]\s*[0-9]`)

// No command registers a flag of ownedFlags with a number of its own: the
// bounds, defaults and help ranges are the owner's constants. Only the
// sentinels 0 and -1 ("not given") are literals. The source is read, so
// a literal equal to today's value is caught too.
func TestNoBoundLiterals(t *testing.T) {
	owned := map[string]bool{}
	for _, o := range ownedFlags() {
		if o.name != "port" { // 1–65535 is a port, not a decision
			owned[o.name] = true
		}
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range ownedFiles {
		f, err := parser.ParseFile(fset, filepath.Join(".", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := ""
			switch x := call.Fun.(type) {
			case *ast.Ident:
				fn = x.Name
			case *ast.SelectorExpr:
				fn = x.Sel.Name
			}
			if !strings.HasSuffix(fn, "Flag") && !strings.HasSuffix(fn, "Var") && !strings.HasSuffix(fn, "VarP") {
				return true
			}
			flag := ""
			for _, a := range call.Args {
				if l, ok := a.(*ast.BasicLit); ok && l.Kind == token.STRING {
					if s, _ := strconv.Unquote(l.Value); owned[s] {
						flag = s
						break
					}
				}
			}
			if flag == "" {
				return true
			}
			checked++
			where := fset.Position(call.Pos())
			ast.Inspect(call, func(n ast.Node) bool {
				switch l := n.(type) {
				case *ast.BasicLit:
					switch l.Kind {
					case token.INT, token.FLOAT:
						if l.Value != "0" {
							t.Errorf("%s: --%s registered with the number %s: take it from the package that owns it", where, flag, l.Value)
						}
					case token.STRING:
						if s, _ := strconv.Unquote(l.Value); rangeInText.MatchString(s) {
							t.Errorf("%s: --%s's help types a range (%q): show the owner's", where, flag, s)
						}
					}
				case *ast.UnaryExpr:
					if b, ok := l.X.(*ast.BasicLit); ok && l.Op == token.SUB && b.Value == "1" {
						return false // the sentinel -1
					}
				}
				return true
			})
			return true
		})
	}
	if checked < 12 {
		t.Fatalf("only %d registrations of owned flags found: the check is broken", checked)
	}
}
