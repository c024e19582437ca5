package emulate

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testdata/nfnetlink_queue.txt is /proc/net/netfilter/nfnetlink_queue of a
// router namespace on Linux 6.18 while this emulator held two pings in
// queue 0 (100 ms delay) and queue 1 was empty.
func TestParseKernelQueues(t *testing.T) {
	b, err := os.ReadFile("testdata/nfnetlink_queue.txt")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := parseKernelQueues(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []kernelQueue{
		{Num: 0, PortID: 17481, Total: 2, CopyMode: 2, CopyRange: 1, IDSequence: 2},
		{Num: 1, PortID: 3124849526, CopyMode: 2, CopyRange: 1},
	}
	if len(qs) != len(want) {
		t.Fatalf("got %+v", qs)
	}
	for i := range want {
		if qs[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, qs[i], want[i])
		}
	}
	if qs, err := parseKernelQueues(nil); err != nil || len(qs) != 0 {
		t.Errorf("empty file: %v %v", qs, err)
	}
	for _, bad := range []string{"0 1 2\n", "0 1 2 2 1 x 0 2 1\n"} {
		if _, err := parseKernelQueues([]byte(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestStatsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	in := Stats{Backend: Backend, Time: time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), Running: true, Queues: []QueueStats{
		{Num: 1, Delay: 25 * time.Millisecond, Received: 10, Released: 9, DroppedLoss: 1, KernelQueueDrops: 3, KernelRead: true},
	}}
	in.Queues[0].setBehind()
	in.Behind = in.Queues[0].Behind
	if !in.Behind {
		t.Fatal("kernel queue drops must make the queue behind")
	}
	if err := writeStats(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := readStats(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.Time != in.Time || out.Queues[0] != in.Queues[0] || out.Behind != in.Behind {
		t.Errorf("got %+v, want %+v", out, in)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if _, err := readStats(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("no error for a missing file")
	}
	os.WriteFile(path, []byte(`{"queues":[]}`), 0o600)
	if _, err := readStats(path); err == nil {
		t.Error("no error for a file without backend")
	}
}

func TestBehind(t *testing.T) {
	for _, tc := range []struct {
		q    QueueStats
		want bool
	}{
		{QueueStats{Received: 100, Released: 90, DroppedLoss: 10}, false},
		{QueueStats{Late: 1}, true},
		{QueueStats{ENOBUFS: 1}, true},
		{QueueStats{KernelUserDropped: 1}, true},
		{QueueStats{KernelQueueDrops: 1}, true},
		{QueueStats{Truncated: 1}, true},
		{QueueStats{VerdictErrors: 1}, true},
	} {
		tc.q.setBehind()
		if tc.q.Behind != tc.want {
			t.Errorf("%+v: behind %v", tc.q, tc.q.Behind)
		}
	}
}

// readStats reads the stats file at path as tests read it (lab reads it
// with Lab.Stats).
func readStats(path string) (Stats, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stats{}, err
	}
	return ParseStats(path, b)
}
