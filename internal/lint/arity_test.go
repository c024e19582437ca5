package lint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// TestArityAgreesWithOpenVPN: for every option with a parameter bound,
// a line one parameter short of the least and one beyond the most is an
// error finding of lint, and the installed openvpn 2.6 refuses the same
// line with "Unrecognized option or missing or extra parameter(s)".
func TestArityAgreesWithOpenVPN(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	dir := t.TempDir()
	type probe struct{ line, conf string }
	var probes []probe
	for name, ar := range openvpn.Arity26() {
		var counts []int
		if ar[0] > 0 {
			counts = append(counts, ar[0]-1)
		}
		if ar[1] >= 0 && ar[1]+1 < openvpn.MaxParams {
			counts = append(counts, ar[1]+1)
		}
		for _, n := range counts {
			line := name + strings.Repeat(" x", n)
			conf := filepath.Join(dir, fmt.Sprintf("%d.conf", len(probes)))
			if err := os.WriteFile(conf, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := openvpn.ReadConfigFile(conf)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if !hasRule(CheckConfig(f, Context{}), "parameter-count", Error) {
				t.Errorf("lint does not refuse %q", line)
			}
			probes = append(probes, probe{line, conf})
		}
	}
	if len(probes) < 250 {
		t.Errorf("only %d lines checked; the table lost options", len(probes))
	}
	// openvpn reads one config per run and stops at its first error: a
	// few runs at a time keep this to seconds.
	var wg sync.WaitGroup
	jobs := make(chan probe)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, _ := exec.CommandContext(ctx, "openvpn", "--config", p.conf).CombinedOutput()
				cancel()
				if !strings.Contains(string(out), "Unrecognized option or missing or extra parameter") {
					t.Errorf("lint refuses %q but openvpn says: %s", p.line, firstLine(string(out)))
				}
			}
		}()
	}
	for _, p := range probes {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	conf := filepath.Join(dir, "a.conf")
	// And the lines of the issue, in a config with everything else right.
	for _, line := range []string{"dev", "proto", "config", "verb a b c", "config a b", "remote H P udp extra extra2", "cipher", "keepalive 10", "tun-mtu 1 2 3", "port 1 2"} {
		if err := os.WriteFile(conf, []byte("client\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := openvpn.ReadConfigFile(conf)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !hasRule(CheckConfig(f, Context{}), "parameter-count", Error) {
			t.Errorf("lint does not refuse %q", line)
		}
	}
}

// TestArityAcceptsRealConfigs: the Debian samples and lint's own test
// configs have no parameter-count finding (the table refuses nothing
// OpenVPN reads).
func TestArityAcceptsRealConfigs(t *testing.T) {
	t.Parallel()
	var files []string
	for _, n := range debianSamples {
		files = append(files, filepath.Join("testdata", "debian", n))
	}
	for _, g := range []string{"*.conf", "rules/*", "rules/*/*"} {
		more, _ := filepath.Glob(filepath.Join("testdata", g))
		files = append(files, more...)
	}
	for _, p := range files {
		f, err := openvpn.ReadConfigFile(p)
		if err != nil {
			continue // a config made to fail parsing
		}
		for _, x := range CheckConfig(f, Context{}) {
			if x.Rule == "parameter-count" {
				t.Errorf("%s:%d: %s", p, x.Line, x.Problem)
			}
		}
	}
}

func hasRule(fs []Finding, rule, sev string) bool {
	for _, f := range fs {
		if f.Rule == rule && f.Severity == sev {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
