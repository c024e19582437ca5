package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

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
	return systemdUnit(systemdArg(exe), id, "", strings.Join(args, " "))
}

// SystemdTemplateDir is where the template unit reads each cluster's serve
// flags: /etc/ovpnperf/cluster-ID.env holds OVPNPERF_SERVE_ARGS.
const SystemdTemplateDir = "/etc/ovpnperf"

// SystemdTemplateUnit is the template unit ovpnperf-cluster@.service that
// the Debian package ships: the instance name is the cluster id
// (`systemctl start ovpnperf-cluster@00a1`), and the serve flags come from
// OVPNPERF_SERVE_ARGS in SystemdTemplateDir/cluster-ID.env, split into
// words by systemd ($VAR unquoted). The rest is SystemdUnit's.
func SystemdTemplateUnit(exe string) string {
	return systemdUnit(systemdArg(exe), "%i",
		"EnvironmentFile="+SystemdTemplateDir+"/cluster-%i.env\n", "$OVPNPERF_SERVE_ARGS")
}

// systemdUnit writes the unit; exe is already an Exec word, id a cluster id
// or the %i specifier, env extra [Service] lines.
func systemdUnit(exe, id, env, serveArgs string) string {
	return fmt.Sprintf(`[Unit]
Description=ovpnperf cluster %[2]s: one OpenVPN server per CPU
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
%[4]sExecStartPre=-%[1]s cluster clean %[2]s
ExecStart=%[1]s cluster serve --id %[2]s %[3]s
ExecStopPost=%[1]s cluster clean %[2]s
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
`, exe, id, serveArgs, env)
}

// systemdArg writes a as one word of an Exec line (systemd.service(5),
// "Command lines"): quoted with C escapes when it has blanks or quotes, and
// with % and $ doubled, since systemd would otherwise expand specifiers
// (%h) and environment variables ($HOME) even inside quotes.
func systemdArg(a string) string {
	if a == ";" {
		// A lone semicolon separates commands in Exec lines; escaped,
		// it is an argument (systemd.service(5)).
		return `\;`
	}
	if strings.ContainsAny(a, " \t\"'\\;\n\r") || a == "" || !utf8.ValidString(a) {
		a = strconv.Quote(a)
	}
	return strings.NewReplacer("%", "%%", "$", "$$").Replace(a)
}
