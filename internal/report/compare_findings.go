package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// What happened to a finding between the old and the new document.
const (
	// FindingAppeared: the kind is in the new document only.
	FindingAppeared = "appeared"
	// FindingGone: the kind is in the old document only.
	FindingGone = "gone"
	// FindingOutcome: both have it, with another outcome.
	FindingOutcome = "outcome-changed"
	// LimitMoved: the subject's confirmed limit is of another kind
	// (cpu-bound → path-bound …); it stands for the old limit's finding
	// going and the new one's appearing.
	LimitMoved = "limit-moved"
)

// limitKinds are the kinds that name what limits a tunnel, in the order
// one is taken as the subject's limit when several are confirmed.
var limitKinds = []finding.Kind{finding.PathBound, finding.CPUBound, finding.WindowBound, finding.Loss, finding.BelowPath}

// problemKinds are the kinds whose confirmed presence is a fault of the
// path or the configuration: one that appears is worse, one that goes is
// better.
var problemKinds = []finding.Kind{finding.SocketDrops, finding.Fragmentation, finding.TunDrops, finding.Loss}

func isOneOf(k finding.Kind, ks []finding.Kind) bool {
	for _, x := range ks {
		if k == x {
			return true
		}
	}
	return false
}

// FindingChange is one finding that differs between the two documents:
// appeared, gone, outcome-changed (matched by finding.Key) or, for a
// subject whose confirmed limit is of another kind, limit-moved (From →
// To). Verdict is Worse, Better or "" (neither); Reason says why.
type FindingChange struct {
	Change  string          `json:"change"`
	Subject finding.Subject `json:"subject"`
	// Kind is the finding's kind; for limit-moved the new limit's (To).
	Kind finding.Kind `json:"kind"`
	// From and To are the old and new limits (limit-moved only).
	From finding.Kind `json:"from,omitempty"`
	To   finding.Kind `json:"to,omitempty"`
	// OldOutcome and NewOutcome are the outcomes on each side; absent on
	// the side that has no such finding.
	OldOutcome verdict.Outcome  `json:"old_outcome,omitempty"`
	NewOutcome verdict.Outcome  `json:"new_outcome,omitempty"`
	Old        *finding.Finding `json:"old,omitempty"`
	New        *finding.Finding `json:"new,omitempty"`
	Verdict    string           `json:"verdict,omitempty"`
	Reason     string           `json:"reason"`
}

// subjectKey is a finding's subject without its rows (which differ from
// document to document).
func subjectKey(s finding.Subject) string {
	return strings.Join([]string{s.Network, s.Variant, s.Direction}, "/")
}

// limitOf is the subject's limit: its first confirmed finding of
// limitKinds, nil when none is confirmed.
func limitOf(fs []finding.Finding) *finding.Finding {
	for _, k := range limitKinds {
		for i := range fs {
			if fs[i].Kind == k && fs[i].Outcome == verdict.Confirmed {
				return &fs[i]
			}
		}
	}
	return nil
}

// CompareFindings matches the findings of two documents by finding.Key
// and says what changed. A subject (network, variant, direction) whose
// confirmed limit differs on the two sides is one limit-moved change: from
// path-bound to another limit is worse (the tunnel no longer keeps up with
// the path), the reverse better, between two other limits neither. A
// confirmed finding of a problem kind (socket drops, fragmentation, tun
// drops, loss) that appears, or that another outcome becomes, is worse;
// one that goes is better. Other changes are reported without a verdict.
// With variants (compare --old-variant/--new-variant) only the findings of
// those variants and those about no variant are compared, by network and
// direction.
func CompareFindings(old, new []finding.Finding, opts CompareOptions) []FindingChange {
	pick := func(fs []finding.Finding, only string) []finding.Finding {
		var out []finding.Finding
		for _, f := range fs {
			if only != "" && f.Subject.Variant != "" {
				if f.Subject.Variant != only {
					continue
				}
				f.Subject.Variant = ""
			}
			out = append(out, f)
		}
		return out
	}
	olds, news := pick(old, opts.OldVariant), pick(new, opts.NewVariant)
	bySubject := func(fs []finding.Finding) map[string][]finding.Finding {
		m := map[string][]finding.Finding{}
		for _, f := range fs {
			m[subjectKey(f.Subject)] = append(m[subjectKey(f.Subject)], f)
		}
		return m
	}
	oldSub, newSub := bySubject(olds), bySubject(news)
	// The keys the limit-moved changes stand for.
	absorbed := map[string]bool{}
	var out []FindingChange
	var subjects []string
	seen := map[string]bool{}
	for _, fs := range [][]finding.Finding{olds, news} {
		for _, f := range fs {
			if k := subjectKey(f.Subject); !seen[k] {
				seen[k] = true
				subjects = append(subjects, k)
			}
		}
	}
	for _, s := range subjects {
		o, n := limitOf(oldSub[s]), limitOf(newSub[s])
		if o == nil || n == nil || o.Kind == n.Kind {
			continue
		}
		c := FindingChange{Change: LimitMoved, Subject: n.Subject, Kind: n.Kind, From: o.Kind, To: n.Kind,
			OldOutcome: o.Outcome, NewOutcome: n.Outcome, Old: ref(*o), New: ref(*n)}
		c.Subject.Rows = nil
		switch {
		case o.Kind == finding.PathBound:
			c.Verdict, c.Reason = Worse, "the tunnel no longer keeps up with the path"
		case n.Kind == finding.PathBound:
			c.Verdict, c.Reason = Better, "the tunnel keeps up with the path now"
		default:
			c.Reason = "another limit than the path's, before and after"
		}
		absorbed[o.Key()], absorbed[n.Key()] = true, true
		out = append(out, c)
	}
	index := func(fs []finding.Finding) (map[string]finding.Finding, []string) {
		m := map[string]finding.Finding{}
		var order []string
		for _, f := range fs {
			if _, dup := m[f.Key()]; !dup {
				order = append(order, f.Key())
				m[f.Key()] = f
			}
		}
		return m, order
	}
	oldKeys, order := index(olds)
	newKeys, newOrder := index(news)
	for _, k := range newOrder {
		if _, ok := oldKeys[k]; !ok {
			order = append(order, k)
		}
	}
	for _, k := range order {
		if absorbed[k] {
			continue
		}
		o, okO := oldKeys[k]
		n, okN := newKeys[k]
		var c FindingChange
		switch {
		case okO && okN && o.Outcome == n.Outcome:
			continue
		case okO && okN:
			c = FindingChange{Change: FindingOutcome, Subject: n.Subject, Kind: n.Kind, OldOutcome: o.Outcome, NewOutcome: n.Outcome, Old: ref(o), New: ref(n)}
			c.Reason = fmt.Sprintf("%s, was %s", n.Outcome, o.Outcome)
		case okN:
			c = FindingChange{Change: FindingAppeared, Subject: n.Subject, Kind: n.Kind, NewOutcome: n.Outcome, New: ref(n)}
			c.Reason = fmt.Sprintf("new, %s", n.Outcome)
		default:
			c = FindingChange{Change: FindingGone, Subject: o.Subject, Kind: o.Kind, OldOutcome: o.Outcome, Old: ref(o)}
			c.Reason = fmt.Sprintf("no longer found (was %s)", o.Outcome)
		}
		c.Subject.Rows = nil
		if isOneOf(c.Kind, problemKinds) {
			was, is := okO && o.Outcome == verdict.Confirmed, okN && n.Outcome == verdict.Confirmed
			switch {
			case is && !was:
				c.Verdict = Worse
				c.Reason += ": a confirmed " + string(c.Kind) + " finding the old document did not have confirmed"
			case was && !is:
				c.Verdict = Better
				c.Reason += ": the old document's confirmed " + string(c.Kind) + " finding is gone"
			}
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return subjectKey(out[i].Subject) < subjectKey(out[j].Subject) })
	return out
}

func ref(f finding.Finding) *finding.Finding { return &f }

// line is the change in one line for the text output.
func (c FindingChange) line() string {
	s := c.Subject.Network
	for _, p := range []string{c.Subject.Variant, c.Subject.Direction} {
		if p != "" {
			s += " " + p
		}
	}
	what := string(c.Kind) + " " + c.Change
	if c.Change == LimitMoved {
		what = fmt.Sprintf("limit moved: %s → %s", c.From, c.To)
	}
	v := ""
	if c.Verdict != "" {
		v = " [" + c.Verdict + "]"
	}
	return fmt.Sprintf("%s: %s%s: %s", s, what, v, c.Reason)
}
