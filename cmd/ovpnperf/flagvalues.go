package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Every numeric, duration and list flag is one of these pflag.Values. Each
// knows the name it was registered under, so a bad value is refused while
// the command line is parsed, before any work starts, with one line that
// names the flag the user typed and the accepted form — never a raw Go
// parse error, never another flag's name. pflag wraps the error;
// flagError unwraps it again.

// value is a flag whose text is parsed by parse(flagName, text).
type value[T any] struct {
	flag  string // "--up-loss", "-P/--flows"
	typ   string
	dst   *T
	text  string
	parse func(flag, s string) (T, error)
	// bounds are the least and the largest value accepted, as typed on a
	// command line (empty for a flag without a range).
	bounds [2]string
}

// boundedValue is a flag with a range: what the bound tests walk.
type boundedValue interface {
	pflag.Value
	Bounds() (lo, hi string)
}

// Bounds returns the least and the largest value the flag accepts, as
// typed on a command line ("" for a flag without a range).
func (v *value[T]) Bounds() (lo, hi string) { return v.bounds[0], v.bounds[1] }

func (v *value[T]) Set(s string) error {
	x, err := v.parse(v.flag, s)
	if err != nil {
		return err
	}
	*v.dst, v.text = x, s
	return nil
}

func (v *value[T]) String() string { return v.text }
func (v *value[T]) Type() string   { return v.typ }

// flagLabel is how errors name a flag: its long form, with the shorthand
// when it has one.
func flagLabel(name, short string) string {
	if short != "" {
		return "-" + short + "/--" + name
	}
	return "--" + name
}

func addValue[T any](fs *pflag.FlagSet, dst *T, name, short, typ, def string, parse func(flag, s string) (T, error), help string) *value[T] {
	v := &value[T]{flag: flagLabel(name, short), typ: typ, dst: dst, text: def, parse: parse}
	fs.VarP(v, name, short, help)
	return v
}

// flagError turns pflag's errors into usage errors: ours come back as they
// were made; pflag's own (unknown flag, missing value) keep its wording.
func flagError(err error) error {
	if err == nil {
		return nil
	}
	var u *usage.Error
	if errors.As(err, &u) {
		return u
	}
	return usage.Errorf("%v", err)
}

// intFlag registers an int flag accepting min..max.
func intFlag(fs *pflag.FlagSet, dst *int, name, short string, def, lo, hi int, help string) {
	*dst = def
	v := addValue(fs, dst, name, short, "int", strconv.Itoa(def), func(flag, s string) (int, error) {
		n, err := parseInt(flag, s, int64(lo), int64(hi))
		return int(n), err
	}, help)
	v.bounds = [2]string{strconv.Itoa(lo), strconv.Itoa(hi)}
}

// rangeFlag registers an int flag accepting r; help is a format whose
// one %s is the range ("1–50"), so the help shows the range checked.
func rangeFlag(fs *pflag.FlagSet, dst *int, name, short string, def int, r bounds.Int, help string) {
	intFlag(fs, dst, name, short, def, r.Min, r.Max, fmt.Sprintf(help, r))
}

// durationRangeFlag registers a duration flag accepting r; help is a
// format whose one %s is the range ("1s–5m").
func durationRangeFlag(fs *pflag.FlagSet, dst *time.Duration, name, short string, def time.Duration, r bounds.Duration, help string) {
	durationFlag(fs, dst, name, short, def, r.Min, r.Max, r.Whole, fmt.Sprintf(help, r))
}

// portFlag registers a port flag accepting 1..65535; def 0 is a flag
// not given (0 is never a port a user means).
func portFlag(fs *pflag.FlagSet, dst *uint16, name string, def uint16, help string) {
	*dst = def
	v := addValue(fs, dst, name, "", "port", strconv.Itoa(int(def)), func(flag, s string) (uint16, error) {
		n, err := parseInt(flag, s, 1, 65535)
		return uint16(n), err
	}, help)
	v.bounds = [2]string{"1", "65535"}
}

// decimalRE is a whole number as people write it: no base prefix (0x,
// 0o, 0b), no leading zero (010 is octal 8 to strconv's base 0 and ten to
// a person), no digit separators.
var decimalRE = regexp.MustCompile(`^[+-]?(0|[1-9][0-9]*)$`)

// parseInt reads a decimal whole number in lo..hi.
func parseInt(flag, s string, lo, hi int64) (int64, error) {
	form := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, usage.Errorf("%s: empty value; want %s", flag, form)
	}
	if !decimalRE.MatchString(t) {
		return 0, usage.Errorf("%s %q: not a decimal whole number; want %s", flag, s, form)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, usage.Errorf("%s %q: out of range; want %s", flag, s, form)
		}
		return 0, usage.Errorf("%s %q: not a whole number; want %s", flag, s, form)
	}
	if n < lo || n > hi {
		return 0, usage.Errorf("%s %q: out of range; want %s", flag, s, form)
	}
	return n, nil
}

// uintFlag registers a uint64 count accepting 0..hi.
func uintFlag(fs *pflag.FlagSet, dst *uint64, name, short string, hi uint64, help string) {
	v := addValue(fs, dst, name, short, "uint", "0", func(flag, s string) (uint64, error) {
		n, err := parseInt(flag, s, 0, int64(min(hi, math.MaxInt64)))
		return uint64(n), err
	}, help)
	v.bounds = [2]string{"0", strconv.FormatUint(min(hi, math.MaxInt64), 10)}
}

// durationFlag registers a Go duration ("2s", "500ms", "1m") accepting
// lo..hi, and only whole seconds when whole is set (iperf3 takes seconds).
func durationFlag(fs *pflag.FlagSet, dst *time.Duration, name, short string, def, lo, hi time.Duration, whole bool, help string) {
	*dst = def
	v := addValue(fs, dst, name, short, "duration", def.String(), func(flag, s string) (time.Duration, error) {
		return parseDuration(flag, s, lo, hi, whole)
	}, help)
	v.bounds = [2]string{lo.String(), hi.String()}
}

func parseDuration(flag, s string, lo, hi time.Duration, whole bool) (time.Duration, error) {
	eg := bounds.FormatDuration(max(lo, min(2*time.Second, hi)))
	form := fmt.Sprintf("a duration with a unit from %s to %s, e.g. %s", bounds.FormatDuration(lo), bounds.FormatDuration(hi), eg)
	if whole {
		form = fmt.Sprintf("whole seconds with a unit from %s to %s, e.g. %s", bounds.FormatDuration(lo), bounds.FormatDuration(hi), eg)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, usage.Errorf("%s: empty value; want %s", flag, form)
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil && t != "0" {
		return 0, usage.Errorf("%s %q: missing unit; want %s", flag, s, form)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, usage.Errorf("%s %q: not a duration; want %s", flag, s, form)
	}
	if d < lo || d > hi {
		return 0, usage.Errorf("%s %q: out of range; want %s", flag, s, form)
	}
	if whole && d%time.Second != 0 {
		return 0, usage.Errorf("%s %q: not whole seconds; want %s", flag, s, form)
	}
	return d, nil
}

// floatFlag registers a plain number accepting lo..hi.
func floatFlag(fs *pflag.FlagSet, dst *float64, name string, def, lo, hi float64, help string) {
	*dst = def
	v := addValue(fs, dst, name, "", "float", strconv.FormatFloat(def, 'g', -1, 64), func(flag, s string) (float64, error) {
		form := fmt.Sprintf("a number from %g to %g", lo, hi)
		t := strings.TrimSpace(s)
		if t == "" {
			return 0, usage.Errorf("%s: empty value; want %s", flag, form)
		}
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(v) {
			return 0, usage.Errorf("%s %q: not a number; want %s", flag, s, form)
		}
		if v < lo || v > hi {
			return 0, usage.Errorf("%s %q: out of range; want %s", flag, s, form)
		}
		return v, nil
	}, help)
	v.bounds = [2]string{strconv.FormatFloat(lo, 'g', -1, 64), strconv.FormatFloat(hi, 'g', -1, 64)}
}

// intListFlag registers a comma-separated list of whole numbers in lo..hi;
// an empty list is refused.
func intListFlag(fs *pflag.FlagSet, dst *[]int, name string, def []int, lo, hi int, help string) {
	*dst = def
	var ds []string
	for _, d := range def {
		ds = append(ds, strconv.Itoa(d))
	}
	v := addValue(fs, dst, name, "", "ints", strings.Join(ds, ","), func(flag, s string) ([]int, error) {
		if strings.TrimSpace(s) == "" {
			return nil, usage.Errorf("%s: empty list; want whole numbers from %d to %d separated by commas, e.g. 256,1024", flag, lo, hi)
		}
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := parseInt(flag, f, int64(lo), int64(hi))
			if err != nil {
				return nil, err
			}
			out = append(out, int(n))
		}
		return out, nil
	}, help)
	v.bounds = [2]string{strconv.Itoa(lo), strconv.Itoa(hi)}
}

// stringListFlag registers a comma-separated list of non-empty words.
func stringListFlag(fs *pflag.FlagSet, dst *[]string, name, form, help string) {
	addValue(fs, dst, name, "", "strings", "", func(flag, s string) ([]string, error) {
		var out []string
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				return nil, usage.Errorf("%s %q: empty entry; want %s", flag, s, form)
			}
			out = append(out, f)
		}
		return out, nil
	}, help)
}

// stringFlag registers a string flag that refuses an empty value: an
// empty --name is a mistake, not a request for the default.
func stringFlag(fs *pflag.FlagSet, dst *string, name, short, def, form, help string) {
	*dst = def
	addValue(fs, dst, name, short, "string", def, func(flag, s string) (string, error) {
		if s == "" {
			return "", usage.Errorf("%s: empty value; want %s (or leave the flag out)", flag, form)
		}
		return s, nil
	}, help)
}

// Path flags, parsed by the lab package's parsers with the typed name.

func rateFlag(fs *pflag.FlagSet, dst *uint64, name, help string) {
	addValue(fs, dst, name, "", "rate", "", lab.ParseRate, help)
}

func timeFlag(fs *pflag.FlagSet, dst *time.Duration, name, help string) {
	addValue(fs, dst, name, "", "duration", "", lab.ParseTime, help)
}

func percentFlag(fs *pflag.FlagSet, dst *float64, name, help string) {
	addValue(fs, dst, name, "", "percent", "", lab.ParsePercent, help)
}

// The layer below guards every flag and positional argument of every
// command, whatever registered it (the typed values above, or plain
// pflag StringVar/Float64Var/DurationVar/IntVar): newRootCommand wraps
// them all, so a command added later gets the same refusals for free.
//
//   - an empty value ("--proto ''") is a mistake, not a request for the
//     default: leave the flag out for that;
//   - a control character (newline, escape) in a value is refused: it
//     would end up in a config line, a file name or on the terminal;
//   - numbers must be finite ("NaN", "Inf" and overflowing literals are
//     refused) and durations must not be negative;
//   - pflag's own parse errors ("strconv.ParseFloat: parsing …") are
//     replaced by one line naming the flag and the accepted form.
//
// A flag whose empty value means something is annotated with
// allowEmpty(fs, name).

const emptyOKAnnotation = "ovpnperf-empty-ok"

// allowEmpty marks a flag whose empty value is meaningful.
func allowEmpty(fs *pflag.FlagSet, name string) {
	_ = fs.SetAnnotation(name, emptyOKAnnotation, []string{"true"})
}

// guardedValue wraps a flag's pflag.Value with the checks above.
type guardedValue struct {
	pflag.Value
	flag    string
	emptyOK bool
}

func (g *guardedValue) Set(s string) error {
	if err := checkFlagText(g.flag, g.Value.Type(), s, g.emptyOK); err != nil {
		return err
	}
	if err := g.Value.Set(s); err != nil {
		var u *usage.Error
		if errors.As(err, &u) {
			return err
		}
		if errors.Is(err, strconv.ErrRange) {
			return usage.Errorf("%s %s: out of range for a %s", g.flag, quoteArg(s), g.Value.Type())
		}
		return usage.Errorf("%s %s: not a valid %s", g.flag, quoteArg(s), g.Value.Type())
	}
	return nil
}

// checkFlagText checks the text of one flag value by the flag's pflag type.
func checkFlagText(flag, typ, s string, emptyOK bool) error {
	if typ == "bool" {
		return nil
	}
	if strings.TrimSpace(s) == "" && !emptyOK {
		return usage.Errorf("%s: empty value; leave the flag out for its default, or give a value", flag)
	}
	if i := strings.IndexFunc(s, isControl); i >= 0 {
		return usage.Errorf("%s %s: contains the control character %s; want printable text", flag, quoteArg(s), quoteArg(s[i:i+1]))
	}
	t := strings.TrimSpace(s)
	switch typ {
	case "float64", "float32", "float":
		v, err := strconv.ParseFloat(t, 64)
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne) && ne.Err == strconv.ErrRange, err == nil && (math.IsInf(v, 0) || math.IsNaN(v)):
			return usage.Errorf("%s %s: not a finite number; want a plain number such as 2.5", flag, quoteArg(s))
		case err != nil, strings.ContainsAny(t, "xX_"):
			// Hexadecimal floats (0x1p4) too: not a plain number.
			return usage.Errorf("%s %s: not a number; want a plain number such as 2.5", flag, quoteArg(s))
		}
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count", "port":
		// Decimal only: pflag's own integers read 0x10, 0o7, 010 (as
		// 8) and 1_000, which nobody means on a command line.
		if !decimalRE.MatchString(t) {
			return usage.Errorf("%s %s: not a decimal whole number", flag, quoteArg(s))
		}
		if _, err := strconv.ParseInt(t, 10, 64); err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
				return usage.Errorf("%s %s: out of range", flag, quoteArg(s))
			}
			return usage.Errorf("%s %s: not a whole number", flag, quoteArg(s))
		}
	case "duration":
		if strings.HasPrefix(t, "-") {
			return usage.Errorf("%s %s: must not be negative; want a duration such as 2s", flag, quoteArg(s))
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// quoteArg quotes a value for an error line: Go quoting, so that control
// characters and escapes are shown, never sent to the terminal.
func quoteArg(s string) string { return strconv.Quote(s) }

// guardCommands wraps every flag and the positional arguments of c and
// its subcommands, and fixes their help placeholders.
func guardCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardCommands(sub)
	}
	guard := func(f *pflag.Flag) {
		if _, done := f.Value.(*guardedValue); done {
			return
		}
		f.Usage = plainUsage(f.Usage)
		f.Value = &guardedValue{Value: f.Value, flag: flagLabel(f.Name, f.Shorthand), emptyOK: f.Annotations[emptyOKAnnotation] != nil}
	}
	c.Flags().VisitAll(guard)
	c.PersistentFlags().VisitAll(guard)
	inner := c.Args
	c.Args = func(cmd *cobra.Command, a []string) error {
		if err := checkPositional(cmd, a); err != nil {
			return err
		}
		if inner != nil {
			return inner(cmd, a)
		}
		return nil
	}
}

// checkPositional refuses empty positional arguments and ones with
// control characters, up to "--" (what follows is another program's
// command line, passed on as given).
func checkPositional(cmd *cobra.Command, a []string) error {
	n := len(a)
	if d := cmd.ArgsLenAtDash(); d >= 0 {
		n = d
	}
	for i, s := range a[:n] {
		if strings.TrimSpace(s) == "" {
			return usage.Errorf("%s: argument %d is empty; see %q", cmd.CommandPath(), i+1, cmd.CommandPath()+" --help")
		}
		if strings.IndexFunc(s, isControl) >= 0 {
			return usage.Errorf("%s: argument %s contains a control character; want printable text", cmd.CommandPath(), quoteArg(s))
		}
	}
	return nil
}

// placeholderRe is a help placeholder pflag may take from backquotes in
// a usage string: a word in capitals (FILE, ADDR:PORT).
var placeholderRe = regexp.MustCompile("^[A-Z][A-Z0-9_:.-]*$")

// plainUsage keeps backquotes around a placeholder (pflag shows the first
// backquoted word as the flag's value name, `FILE`) and turns every other
// backquoted text (a command such as `ovpnperf report`) into quoted text,
// which pflag would otherwise show as the placeholder.
func plainUsage(u string) string {
	parts := strings.Split(u, "`")
	if len(parts) < 3 {
		return u
	}
	var b strings.Builder
	b.WriteString(parts[0])
	for i := 1; i < len(parts); i++ {
		if i%2 == 1 && i+1 < len(parts) {
			if placeholderRe.MatchString(parts[i]) {
				b.WriteString("`" + parts[i] + "`")
			} else {
				b.WriteString(`"` + parts[i] + `"`)
			}
			continue
		}
		if i%2 == 1 { // an unpaired backquote
			b.WriteString("'")
		}
		b.WriteString(parts[i])
	}
	return b.String()
}
