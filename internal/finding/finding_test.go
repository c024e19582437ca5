package finding

import (
	"math"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	good := Finding{Kind: CPUBound, Subject: Subject{Network: "lan", Variant: "default", Direction: "up"}, Outcome: verdict.Confirmed,
		Figures: Figures{"busiest_thread_share_percent": 97}, Text: "a sentence"}
	if err := good.Check(); err != nil {
		t.Fatalf("well-formed finding refused: %v", err)
	}
	bad := map[string]func(f *Finding){
		"kind":    func(f *Finding) { f.Kind = "cpu" },
		"outcome": func(f *Finding) { f.Outcome = "yes" },
		"network": func(f *Finding) { f.Subject.Network = "" },
		"nan":     func(f *Finding) { f.Figures = Figures{"rate_bps": math.NaN()} },
		"unit":    func(f *Finding) { f.Figures = Figures{"rate": 1} },
		"text":    func(f *Finding) { f.Text = " " },
	}
	for name, spoil := range bad {
		f := good
		f.Figures = Figures{"busiest_thread_share_percent": 97}
		spoil(&f)
		if f.Check() == nil {
			t.Errorf("%s: a spoilt finding passed Check", name)
		}
	}
	if k := (Finding{Kind: Loss, Subject: Subject{Network: "real", Direction: "up"}}).Key(); k != "real//up/loss" {
		t.Errorf("Key = %q", k)
	}
}
