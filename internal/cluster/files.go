package cluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// ValidID reports whether id is a cluster id.
func ValidID(id string) bool { return idRE.MatchString(id) }

// ClientConfig renders base with its remotes replaced by one `remote HOST
// PORT PROTO` per instance and remote-random, for clients that can run
// nothing but OpenVPN: each picks an instance at random and moves to
// another when one does not answer.
func ClientConfig(base *openvpn.Config, host string, instances []InstanceStatus) (string, error) {
	c := base.Clone()
	for _, n := range []string{"remote", "remote-random", "proto", "port", "rport"} {
		c.Remove(n)
	}
	if len(instances) == 0 {
		return "", fmt.Errorf("the cluster has no instances")
	}
	for _, s := range instances {
		p := "udp"
		if s.Proto == openvpn.TCP {
			p = "tcp-client"
		}
		c.Add("remote", host, strconv.Itoa(int(s.Port)), p)
	}
	c.Add("remote-random")
	return c.Render()
}

// SystemdUnit is a unit file that runs `cluster serve` under systemd:
// SIGTERM drains and stops; ExecStopPost cleans what a crash left.
func SystemdUnit(exe, id string, serveArgs []string) string {
	args := make([]string, 0, len(serveArgs))
	for _, a := range serveArgs {
		args = append(args, systemdArg(a))
	}
	return fmt.Sprintf(`[Unit]
Description=ovpnperf cluster %[2]s: one OpenVPN server per CPU
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStartPre=-%[1]s cluster clean %[2]s
ExecStart=%[1]s cluster serve --id %[2]s %[3]s
ExecStopPost=%[1]s cluster clean %[2]s
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
`, systemdArg(exe), id, strings.Join(args, " "))
}

// systemdArg writes a as one word of an Exec line (systemd.service(5),
// "Command lines"): quoted with C escapes when it has blanks or quotes, and
// with % and $ doubled, since systemd would otherwise expand specifiers
// (%h) and environment variables ($HOME) even inside quotes.
func systemdArg(a string) string {
	if strings.ContainsAny(a, " \t\"'\\") || a == "" {
		a = strconv.Quote(a)
	}
	return strings.NewReplacer("%", "%%", "$", "$$").Replace(a)
}
