package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

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
}

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

func addValue[T any](fs *pflag.FlagSet, dst *T, name, short, typ, def string, parse func(flag, s string) (T, error), help string) {
	v := &value[T]{flag: flagLabel(name, short), typ: typ, dst: dst, text: def, parse: parse}
	fs.VarP(v, name, short, help)
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
	addValue(fs, dst, name, short, "int", strconv.Itoa(def), func(flag, s string) (int, error) {
		n, err := parseInt(flag, s, int64(lo), int64(hi))
		return int(n), err
	}, help)
}

// parseInt reads a decimal whole number in lo..hi.
func parseInt(flag, s string, lo, hi int64) (int64, error) {
	form := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, usage.Errorf("%s: empty value; want %s", flag, form)
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
	addValue(fs, dst, name, short, "uint", "0", func(flag, s string) (uint64, error) {
		n, err := parseInt(flag, s, 0, int64(min(hi, math.MaxInt64)))
		return uint64(n), err
	}, help)
}

// durationFlag registers a Go duration ("2s", "500ms", "1m") accepting
// lo..hi, and only whole seconds when whole is set (iperf3 takes seconds).
func durationFlag(fs *pflag.FlagSet, dst *time.Duration, name, short string, def, lo, hi time.Duration, whole bool, help string) {
	*dst = def
	addValue(fs, dst, name, short, "duration", def.String(), func(flag, s string) (time.Duration, error) {
		return parseDuration(flag, s, lo, hi, whole)
	}, help)
}

func parseDuration(flag, s string, lo, hi time.Duration, whole bool) (time.Duration, error) {
	form := fmt.Sprintf("a duration with a unit from %v to %v, e.g. %v", lo, hi, max(lo, min(2*time.Second, hi)))
	if whole {
		form = fmt.Sprintf("whole seconds with a unit from %v to %v, e.g. %v", lo, hi, max(lo, min(2*time.Second, hi)))
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
	addValue(fs, dst, name, "", "float", strconv.FormatFloat(def, 'g', -1, 64), func(flag, s string) (float64, error) {
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
}

// intListFlag registers a comma-separated list of whole numbers in lo..hi;
// an empty list is refused.
func intListFlag(fs *pflag.FlagSet, dst *[]int, name string, def []int, lo, hi int, help string) {
	*dst = def
	var ds []string
	for _, d := range def {
		ds = append(ds, strconv.Itoa(d))
	}
	addValue(fs, dst, name, "", "ints", strings.Join(ds, ","), func(flag, s string) ([]int, error) {
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
