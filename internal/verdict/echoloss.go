package verdict

// The claim "the path loses packets" (docs/evidence.md, rule 5) is judged
// on paced echoes sent on the idle path, one every 10 ms: they build no
// queue, so what they lose is the path's own. probe (its loss finding)
// and measure (its loss finding, raised by outside TCP retransmitting)
// both judge it here.
const (
	// LossShare: more than 1 % of the paced echoes lost confirms that the
	// path loses packets.
	LossShare = 0.01
	// LossEchoes is how many paced echoes probe (by default) and measure
	// send: at LossShare, 3 lost.
	LossEchoes = 300
	// LossMinEchoes: refuting needs at least this many echoes sent, of
	// which at most half of LossShare were lost.
	LossMinEchoes = LossEchoes / 2
)

// EchoLossReason says why paced echoes did not decide the claim.
type EchoLossReason string

// Reasons of an undecided EchoLoss.
const (
	// EchoesNoneAnswered: no echo came back (ICMP blocked, no answer, or
	// nothing sent): the echoes cannot tell loss from a host that does
	// not answer. Not tested.
	EchoesNoneAnswered EchoLossReason = "none answered"
	// EchoesNearRule: more than half of LossShare lost, at most LossShare.
	// Noise.
	EchoesNearRule EchoLossReason = "near the rule"
	// EchoesTooFew: at most half of LossShare lost, of fewer than
	// LossMinEchoes sent. Noise.
	EchoesTooFew EchoLossReason = "too few"
	// EchoesNotCounted: a lost percent without the count of echoes
	// behind it (a document written before the counts) at or below half
	// of LossShare: refuting needs the count. Not tested.
	EchoesNotCounted EchoLossReason = "not counted"
)

// EchoLoss is the judgement of paced echoes: the outcome of the claim
// "the path loses packets", and the figures it rests on.
type EchoLoss struct {
	Outcome Outcome
	// Reason is set when Outcome is Noise or NotTested.
	Reason EchoLossReason
	// Counted: judged from the counts (Sent, Lost); otherwise from a lost
	// percent alone, and Sent and Lost are 0.
	Counted     bool
	Sent, Lost  int
	LostPercent float64
}

// JudgeEchoLoss judges sent paced echoes of which answered came back:
// more than LossShare lost confirms; at most half of it, of at least
// LossMinEchoes sent, refutes; in between (or fewer echoes) is noise;
// without an answered echo it is not tested.
func JudgeEchoLoss(sent, answered int) EchoLoss {
	answered = min(max(answered, 0), max(sent, 0))
	if sent <= 0 || answered == 0 {
		j := EchoLoss{Outcome: NotTested, Reason: EchoesNoneAnswered, Counted: true, Sent: max(sent, 0), Lost: max(sent, 0)}
		if sent > 0 {
			j.LostPercent = 100
		}
		return j
	}
	j := EchoLoss{Counted: true, Sent: sent, Lost: sent - answered}
	share := float64(j.Lost) / float64(sent)
	j.LostPercent = 100 * share
	switch {
	case share > LossShare:
		j.Outcome = Confirmed
	case share <= LossShare/2 && sent >= LossMinEchoes:
		j.Outcome = Refuted
	case share <= LossShare/2:
		j.Outcome, j.Reason = Noise, EchoesTooFew
	default:
		j.Outcome, j.Reason = Noise, EchoesNearRule
	}
	return j
}

// JudgeEchoLossPercent judges a lost percent whose count of echoes is not
// known (a document written before it carried the counts). It decides
// only what the rule decides without the count: above LossShare confirms,
// above half of it is noise whatever the count, every echo lost is not
// tested (none answered); at or below half of it the count decides
// between refuted and too few, so it is not tested (EchoesNotCounted).
// No count is assumed.
func JudgeEchoLossPercent(lostPercent float64) EchoLoss {
	j := EchoLoss{LostPercent: lostPercent}
	share := lostPercent / 100
	switch {
	case share >= 1:
		j.Outcome, j.Reason = NotTested, EchoesNoneAnswered
	case share > LossShare:
		j.Outcome = Confirmed
	case share > LossShare/2:
		j.Outcome, j.Reason = Noise, EchoesNearRule
	default:
		j.Outcome, j.Reason = NotTested, EchoesNotCounted
	}
	return j
}
