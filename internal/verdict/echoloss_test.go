package verdict

import "testing"

// The paced-echo loss rule at its edges: more than 1 % lost confirms, at
// most half of it of at least LossMinEchoes refutes, in between or fewer
// echoes is noise, none answered is not tested.
func TestJudgeEchoLoss(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sent, answered int
		want           Outcome
		reason         EchoLossReason
	}{
		{0, 0, NotTested, EchoesNoneAnswered},
		{300, 0, NotTested, EchoesNoneAnswered},
		{300, 300, Refuted, ""},
		{300, 299, Refuted, ""},
		{LossMinEchoes, LossMinEchoes, Refuted, ""},
		{LossMinEchoes - 1, LossMinEchoes - 1, Noise, EchoesTooFew},
		{10, 10, Noise, EchoesTooFew},
		{300, 298, Noise, EchoesNearRule},
		{300, 297, Noise, EchoesNearRule}, // exactly 1 %: not more than the rule
		{300, 296, Confirmed, ""},
		{10, 9, Confirmed, ""},
		{300, 1, Confirmed, ""},
		{300, 400, Refuted, ""}, // more answers than echoes (duplicates) count as all answered
	} {
		j := JudgeEchoLoss(c.sent, c.answered)
		if j.Outcome != c.want || j.Reason != c.reason || !j.Counted {
			t.Errorf("%d sent, %d answered: %+v, want %s (%q)", c.sent, c.answered, j, c.want, c.reason)
		}
		if c.sent > 0 && j.Sent != c.sent {
			t.Errorf("%d sent: %+v", c.sent, j)
		}
		// A percent alone decides the same wherever the rule does not
		// need the count, and says it could not where it does.
		p := JudgeEchoLossPercent(j.LostPercent)
		if p.Counted {
			t.Errorf("percent %v: counted", j.LostPercent)
		}
		if c.sent == 0 {
			continue
		}
		switch {
		case p.Outcome == NotTested && p.Reason == EchoesNotCounted:
			if j.LostPercent > 100*LossShare/2 {
				t.Errorf("percent %v: not counted, but the rule needs no count there", j.LostPercent)
			}
		case p.Outcome != j.Outcome || p.Reason != j.Reason:
			t.Errorf("percent %v: %+v, counts: %+v", j.LostPercent, p, j)
		}
	}
}
