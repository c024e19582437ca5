package cpuacct

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// Captured on the 2-core development VM.
	b, err := os.ReadFile(filepath.Join("testdata", "proc_stat"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseProcStat(b)
	if err != nil {
		t.Fatal(err)
	}
	want := SystemTimes{User: hz(198905), System: hz(122154), Idle: hz(159226), IOWait: hz(514), SoftIRQ: hz(32106), Steal: hz(774)}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got.Busy() != hz(198905+122154+32106+774) {
		t.Errorf("busy %v", got.Busy())
	}
	if got.Total() != hz(198905+122154+159226+514+32106+774) {
		t.Errorf("total %v", got.Total())
	}
	later := got
	later.User += hz(150)
	later.Idle += hz(40)
	later.IOWait += hz(10)
	if share := later.BusyShareSince(got); share != 0.75 {
		t.Errorf("busy share %v, want 0.75", share)
	}
	if share := got.BusyShareSince(got); share != 0 {
		t.Errorf("busy share over no time %v, want 0", share)
	}
	// Steal adds 50 ticks to the 200 above.
	later.Steal += hz(50)
	if share := later.StealShareSince(got); share != 0.2 {
		t.Errorf("steal share %v, want 0.2 (50 of 250 ticks)", share)
	}
	if share := got.StealShareSince(got); share != 0 {
		t.Errorf("steal share over no time %v, want 0", share)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8 9\n"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat(%q): no error", bad)
		}
	}
}

// TestSystemSeesBurn: CPU this process burns shows in the machine's busy
// time (which may hold more: other work on the machine).
func TestSystemSeesBurn(t *testing.T) {
	a, err := ReadSystem()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	burn(300 * time.Millisecond)
	b, err := ReadSystem()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start).Seconds()
	busy, softirq := SystemDelta(a, b)
	if busy < 0.2 || busy > wall*float64(runtime.NumCPU())+0.05 {
		t.Errorf("machine busy %.3f s over %.3f s wall with 300 ms burned here", busy, wall)
	}
	if softirq < 0 || softirq > busy {
		t.Errorf("softirq %.3f s of %.3f s busy", softirq, busy)
	}
}
