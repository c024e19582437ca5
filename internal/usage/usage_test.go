package usage

import (
	"errors"
	"testing"
)

func TestCheckFlagError(t *testing.T) {
	t.Parallel()
	if err := CheckFlagError("--rate", Errorf("--rate %q: want a rate such as 15mbit", "x")); err != nil {
		t.Errorf("a good error was refused: %v", err)
	}
	for name, bad := range map[string]error{
		"not a usage error": errors.New("--rate: bad"),
		"two lines":         Errorf("--rate: bad\nmore"),
		"other flag":        Errorf("--rtt: bad"),
	} {
		if CheckFlagError("--rate", bad) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
