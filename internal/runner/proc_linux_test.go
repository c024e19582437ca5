package runner

import (
	"os"
	"os/exec"
	"testing"
)

func TestAlive(t *testing.T) {
	ticks, err := StartTicks(os.Getpid())
	if err != nil || ticks == 0 {
		t.Fatalf("own start time: %d, %v", ticks, err)
	}
	if !Alive(os.Getpid(), ticks) || !Alive(os.Getpid(), 0) {
		t.Error("this process is not alive")
	}
	if Alive(os.Getpid(), ticks+1) {
		t.Error("another start time (a recycled pid) counts as alive")
	}
	if Alive(0, 0) || Alive(-1, 0) {
		t.Error("pid 0 or -1 counts as alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid, 0) {
		t.Error("a reaped child counts as alive")
	}
}
