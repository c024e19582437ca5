// Package hostcollect collects the description of this machine that
// documents carry (hostinfo.Host): hostinfo's kernel and CPU facts and
// the versions of openvpn and iperf3, each program asked with a time
// limit (runner.RunBounded). It sits apart from hostinfo, which runs no
// program, because running one needs internal/runner.
package hostcollect

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Host reads the kernel, CPU and program versions of this machine.
// A program that is not installed leaves its version empty; only an
// unreadable /proc/cpuinfo or failing uname is an error.
func Host(ctx context.Context) (hostinfo.Host, error) {
	var h hostinfo.Host
	var err error
	if h.Kernel, h.Arch, err = hostinfo.Kernel(); err != nil {
		return h, err
	}
	cpu, err := hostinfo.ReadCPU()
	if err != nil {
		return h, err
	}
	h.CPUModel, h.CPUs, h.AESNI = cpu.Model, cpu.Count, cpu.AES()
	if h.CPUs == 0 {
		h.CPUs = runtime.NumCPU()
	}
	// Both asked at once: two programs that hang cost one time limit.
	iperf3 := make(chan string, 1)
	go func() { iperf3 <- firstLineOf(ctx, "iperf3", "--version") }()
	h.OpenVPNVersion = firstLineOf(ctx, "openvpn", "--version")
	h.Iperf3Version = <-iperf3
	return h, nil
}

// firstLineOf runs argv and returns the first line of its output, or ""
// if the program is missing or prints nothing, or says it is unknown when
// the program does not answer within runner.VersionTimeout. openvpn
// --version exits with status 1 on some releases, so the status is not
// looked at.
func firstLineOf(ctx context.Context, argv ...string) string {
	if runner.Require(argv[0]) != nil {
		return ""
	}
	out, err := runner.RunBounded(ctx, runner.VersionTimeout, argv...)
	var te *runner.TimeoutError
	if errors.As(err, &te) {
		return fmt.Sprintf("unknown (`%s` did not answer within %v)", strings.Join(argv, " "), te.Limit)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
