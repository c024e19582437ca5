package openvpn

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Log is what ParseLog finds in an OpenVPN 2.6 log written at verb 3 (some
// fields, such as MTUParms, need verb 4).
type Log struct {
	// Version is the release ("2.6.14"), VersionLine the whole banner line
	// and Features its bracketed build features ("SSL (OpenSSL)", "LZO",
	// "LZ4", "EPOLL", "AEAD", "DCO" …).
	Version     string   `json:"version,omitempty"`
	VersionLine string   `json:"version_line,omitempty"`
	Features    []string `json:"features,omitempty"`
	// Libraries is the "library versions:" line's value.
	Libraries string `json:"libraries,omitempty"`
	// DCOVersion is the kernel module's version, "N/A" when the kernel has
	// no ovpn-dco; DCODisabled holds OpenVPN's notice when it fell back to
	// userspace because the module was missing.
	DCOVersion  string `json:"dco_version,omitempty"`
	DCODisabled string `json:"dco_disabled,omitempty"`
	// Compression lists lines about compression: the allow-compression
	// warning and "LZ4v2 compression initializing" style notices.
	Compression []string `json:"compression,omitempty"`
	// DataCipher and DataAuth are the negotiated data-channel cipher and
	// HMAC digest: "AES-256-GCM" and "" for AEAD ciphers, "AES-256-CBC"
	// and "SHA256", "none" for OpenVPN's [null-cipher] / [null-digest].
	DataCipher string `json:"data_cipher,omitempty"`
	DataAuth   string `json:"data_auth,omitempty"`
	// ControlChannel is the TLS description, e.g. "TLSv1.3, cipher
	// TLSv1.3 TLS_AES_256_GCM_SHA384".
	ControlChannel string `json:"control_channel,omitempty"`
	// SocketBuffers lists every "Socket Buffers:" line in order; the last
	// one is in force (a pushed sndbuf/rcvbuf adds a line).
	SocketBuffers []SocketBuffers `json:"socket_buffers,omitempty"`
	// TunMTU is the MTU OpenVPN last set on its tun device and TunDev the
	// device.
	TunMTU int    `json:"tun_mtu,omitempty"`
	TunDev string `json:"tun_dev,omitempty"`
	// MTUParms are the fields of the last "Data Channel MTU parms [ … ]"
	// line (verb 4): mss_fix, max_frag, tun_mtu, tun_max_mtu, headroom,
	// payload, tailroom, ET.
	MTUParms map[string]int `json:"mtu_parms,omitempty"`
	// PushReply is the PUSH_REPLY the client received or the server sent.
	PushReply string `json:"push_reply,omitempty"`
	// PeerConnected is set when a TLS session with a peer came up.
	PeerConnected bool `json:"peer_connected"`
	// Ready is set by "Initialization Sequence Completed".
	Ready bool `json:"ready"`
	// Warnings and Errors collect lines OpenVPN marks as such; Exit is
	// the line saying why the process ended ("SIGTERM[hard,] received,
	// process exiting").
	Warnings []string `json:"warnings,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Exit     string   `json:"exit,omitempty"`
}

// SocketBuffers is one "Socket Buffers: R=[a->b] S=[c->d]" line: the
// receive and send buffer sizes before and after OpenVPN set them.
type SocketBuffers struct {
	RecvBefore int `json:"recv_before"`
	RecvAfter  int `json:"recv_after"`
	SendBefore int `json:"send_before"`
	SendAfter  int `json:"send_after"`
}

var (
	// "2026-11-22 02:13:58 " and, from verb 4 on, "us=207564 ".
	logTimestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (us=\d+ )?`)
	versionRE      = regexp.MustCompile(`OpenVPN (\d+\.\d+\.\d+\S*) \S+ ((?:\[[^\]]*\] ?)+)`)
	featureRE      = regexp.MustCompile(`\[([^\]]*)\]`)
	dataChannelRE  = regexp.MustCompile(`Data Channel: cipher '([^']*)'(?:, auth '([^']*)')?`)
	sockBufRE      = regexp.MustCompile(`Socket Buffers: R=\[(\d+)->(\d+)\] S=\[(\d+)->(\d+)\]`)
	ifaceMTURE     = regexp.MustCompile(`net_iface_mtu_set: mtu (\d+) for (\S+)`)
	mtuParmsRE     = regexp.MustCompile(`Data Channel MTU parms \[ (.*) \]`)
	controlRE      = regexp.MustCompile(`Control Channel: (.*?)(?:, peer certificate|$)`)
	pushReplyRE    = regexp.MustCompile(`'(PUSH_REPLY,[^']*)'`)
)

// nullName maps OpenVPN's names for "no cipher" and "no digest" to the
// directive value.
func nullName(s string) string {
	if s == "[null-cipher]" || s == "[null-digest]" {
		return "none"
	}
	return s
}

// ParseLog reads an OpenVPN log. It never fails on content it does not
// know; it fails only when reading fails.
func ParseLog(r io.Reader) (*Log, error) {
	l := &Log{}
	err := readLogLines(r, func(b []byte, _ bool) { l.parseLine(string(b)) })
	return l, err
}

// StripTimestamp removes the date, time and microseconds OpenVPN puts in
// front of each line when it logs to stdout or a --log file.
func StripTimestamp(line string) string {
	// "2026-11-22 02:13:58 ": a cheap look before the regexp.
	if len(line) < 20 || line[4] != '-' || line[13] != ':' || line[0] < '0' || line[0] > '9' {
		return line
	}
	if loc := logTimestampRE.FindStringIndex(line[:min(len(line), 64)]); loc != nil {
		return line[loc[1]:]
	}
	return line
}

func (l *Log) parseLine(raw string) {
	l.parseStripped(strings.TrimRight(StripTimestamp(raw), " \r"))
}

// parseStripped reads one line without its timestamp. Each regexp runs
// only on lines holding its literal text.
func (l *Log) parseStripped(line string) {
	switch {
	case l.VersionLine == "" && strings.Contains(line, "OpenVPN ") && versionRE.MatchString(line):
		m := versionRE.FindStringSubmatch(line)
		l.Version = m[1]
		l.VersionLine = line[strings.Index(line, "OpenVPN "):]
		for _, f := range featureRE.FindAllStringSubmatch(m[2], -1) {
			l.Features = append(l.Features, f[1])
		}
	case strings.HasPrefix(line, "library versions: "):
		l.Libraries = strings.TrimPrefix(line, "library versions: ")
	case strings.HasPrefix(line, "DCO version: "):
		l.DCOVersion = strings.TrimPrefix(line, "DCO version: ")
	case strings.Contains(line, "disabling data channel offload"):
		l.DCODisabled = line
	case strings.Contains(line, "Data Channel: cipher '") && dataChannelRE.MatchString(line) && !strings.Contains(line, "Outgoing") && !strings.Contains(line, "Incoming"):
		m := dataChannelRE.FindStringSubmatch(line)
		l.DataCipher = nullName(m[1])
		l.DataAuth = nullName(m[2])
	case strings.Contains(line, "Socket Buffers: ") && sockBufRE.MatchString(line):
		m := sockBufRE.FindStringSubmatch(line)
		l.SocketBuffers = append(l.SocketBuffers, SocketBuffers{atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])})
	case strings.Contains(line, "net_iface_mtu_set: ") && ifaceMTURE.MatchString(line):
		m := ifaceMTURE.FindStringSubmatch(line)
		l.TunMTU, l.TunDev = atoi(m[1]), m[2]
	case strings.Contains(line, "MTU parms [") && mtuParmsRE.MatchString(line):
		m := mtuParmsRE.FindStringSubmatch(line)
		l.MTUParms = map[string]int{}
		for _, kv := range strings.Fields(m[1]) {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				if n, err := strconv.Atoi(v); err == nil {
					l.MTUParms[k] = n
				}
			}
		}
	case strings.Contains(line, "Control Channel: ") && controlRE.MatchString(line):
		l.ControlChannel = controlRE.FindStringSubmatch(line)[1]
	case strings.Contains(line, "PUSH_REPLY,"):
		if m := pushReplyRE.FindStringSubmatch(line); m != nil {
			l.PushReply = m[1]
		}
	case strings.Contains(line, "Peer Connection Initiated"):
		l.PeerConnected = true
	case strings.Contains(line, "Initialization Sequence Completed"):
		l.Ready = true
		if strings.Contains(line, "With Errors") {
			l.Errors = append(l.Errors, line)
		}
	case strings.Contains(line, "process exiting") || strings.Contains(line, "Exiting due to fatal error"):
		l.Exit = line
		if strings.Contains(line, "fatal") {
			l.Errors = append(l.Errors, line)
		}
	case isErrorLine(line):
		l.Errors = append(l.Errors, line)
	case strings.Contains(line, "WARNING") || strings.HasPrefix(line, "Warning"):
		l.Warnings = append(l.Warnings, line)
	}
	if containsFold(line, "compression") && !strings.HasPrefix(line, "Note: --cipher") {
		l.Compression = append(l.Compression, line)
	}
}

// containsFold is strings.Contains ignoring ASCII case, without
// allocating a lower-case copy; sub is in lower case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func isErrorLine(line string) bool {
	if strings.HasPrefix(line, "Note:") {
		return false
	}
	for _, s := range []string{"ERROR", "Options error", "TLS Error", "AUTH_FAILED", "Cannot ", "cannot ", "failed", "Fatal", "fatal error", "VERIFY ERROR", "Unsupported ", "unsupported "} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// Version is what `openvpn --version` says about the installed OpenVPN.
type Version struct {
	Version    string   `json:"version"`
	Line       string   `json:"line"`
	Features   []string `json:"features"`
	Libraries  string   `json:"libraries"`
	DCOVersion string   `json:"dco_version"`
}

// DCO reports whether the kernel offers data channel offload ("DCO
// version: N/A" means the ovpn-dco module is missing).
func (v Version) DCO() bool {
	return v.DCOVersion != "" && v.DCOVersion != "N/A"
}

// ParseVersion reads the output of `openvpn --version`.
func ParseVersion(out string) Version {
	l, _ := ParseLog(strings.NewReader(out))
	return Version{Version: l.Version, Line: l.VersionLine, Features: l.Features, Libraries: l.Libraries, DCOVersion: l.DCOVersion}
}

// InstalledVersion runs `openvpn --version` (in the host's namespace; the
// module list is the kernel's, the same in every namespace). openvpn
// exits with status 1 after printing its version, which is not an error.
func InstalledVersion(ctx context.Context) (Version, error) {
	if err := runner.Require("openvpn"); err != nil {
		return Version{}, err
	}
	out, err := runner.RunBounded(ctx, runner.VersionTimeout, "openvpn", "--version")
	v := ParseVersion(string(out))
	if v.Version == "" {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return Version{}, &versionError{out: string(out), err: err}
	}
	return v, nil
}

type versionError struct {
	out string
	err error
}

func (e *versionError) Error() string {
	return "running \"openvpn --version\": no version in its output: " + e.err.Error() + "\n" + strings.TrimSpace(e.out)
}
