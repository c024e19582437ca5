package main

import "testing"

// refusedForSteal accepts the emulator's refusal only with the host's
// steal at 2 % or more; the reasons are as lab run wrote them.
func TestRefusedForSteal(t *testing.T) {
	for _, c := range []struct {
		reason string
		want   bool
	}{
		{"the link emulator fell behind during the sample (66 of 5966 packets released late, 2.75ms on average): figure not valid; the host's CPUs were 30 % busy during it, 13.3 % of their time taken by the hypervisor (steal) (all 3 tries of sample 1 of 1 invalid)", true},
		{"the link emulator stalled during the sample (1 packets released more than 50ms late): figure not valid; the host's CPUs were 91 % busy during it, 2.0 % of their time taken by the hypervisor (steal)", true},
		{"the link emulator fell behind during the sample (66 of 5966 packets released late, 2.75ms on average): figure not valid; the host's CPUs were 97 % busy during it, 0.4 % of their time taken by the hypervisor (steal)", false},
		{"the link emulator fell behind during the sample (66 of 5966 packets released late, 2.75ms on average): figure not valid", false},
		{"the link emulator lost 3 packets it could not handle during the sample: figure not valid; the host's CPUs were 30 % busy during it, 13.3 % of their time taken by the hypervisor (steal)", false},
		{"iperf3: unable to connect; the host's CPUs were 30 % busy during it, 13.3 % of their time taken by the hypervisor (steal)", false},
	} {
		if got := refusedForSteal(c.reason); got != c.want {
			t.Errorf("refusedForSteal(%.60q…) = %v, want %v", c.reason, got, c.want)
		}
	}
}
