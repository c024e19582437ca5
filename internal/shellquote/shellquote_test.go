package shellquote

import (
	"os/exec"
	"strings"
	"testing"
)

// Every quoted word comes back from a real shell as the argument it was.
func TestRoundTripThroughSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	args := []string{"plain", "", "/etc/open vpn/it's.key", `a"b`, `back\slash`, "$HOME", "*", "semi;colon", "new\nline", "~user", "tun-mtu 9000;mssfix 0", "x'y'z"}
	// printf '%s\0' prints each argument as the shell parsed it.
	out, err := exec.Command(sh, "-c", "printf '%s\\0' "+Join(args...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(args) {
		t.Fatalf("sh saw %d arguments, want %d: %q", len(got), len(args), got)
	}
	for i := range args {
		if got[i] != args[i] {
			t.Errorf("argument %d: sh saw %q, want %q (quoted %s)", i, got[i], args[i], Arg(args[i]))
		}
	}
	if Arg("plain-word_1.conf") != "plain-word_1.conf" {
		t.Errorf("a plain word got quotes: %s", Arg("plain-word_1.conf"))
	}
}
