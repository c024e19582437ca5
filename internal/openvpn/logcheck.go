package openvpn

import (
	"bufio"
	"io"
	"regexp"
	"strings"
)

// LogEvent is one log line that matters to a config review, with its
// 1-based line number in the input.
type LogEvent struct {
	Line int    `json:"line"`
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Kinds of LogEvent.
const (
	EventSocketBuffers = "socket-buffers"
	EventCipher        = "data-cipher"
	EventCipherFail    = "cipher-negotiation-failed"
	EventMTU           = "mtu"
	EventTooLarge      = "packet-too-large"
	EventReplay        = "replay"
	EventCompression   = "compression"
	EventRestart       = "restart"
	EventDCO           = "dco"
)

// LogReport is what ScanLog finds in an OpenVPN log (a --log file,
// stdout, or `journalctl -u openvpn@X` output): the fields ParseLog
// fills, and the events a config review cites, by line.
type LogReport struct {
	Log
	Events []LogEvent `json:"events"`
	// SocketBufferLines are the line numbers of Log.SocketBuffers.
	SocketBufferLines []int `json:"socket_buffer_lines,omitempty"`
}

// Count returns how many events of this kind were seen.
func (r *LogReport) Count(kind string) int {
	n := 0
	for _, e := range r.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// First returns the first event of this kind.
func (r *LogReport) First(kind string) (LogEvent, bool) {
	for _, e := range r.Events {
		if e.Kind == kind {
			return e, true
		}
	}
	return LogEvent{}, false
}

// journalPrefixRE is journalctl's default "short" prefix: "Nov 23
// 10:00:00 host openvpn[123]: " (also short-iso's "2026-11-23T10:00:00+0000
// host unit[pid]: ").
var journalPrefixRE = regexp.MustCompile(`^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d{4}|Z)?) \S+ [^\s:\[]+(?:\[\d+\])?: `)

// StripJournalPrefix removes journalctl's date, host and unit prefix.
func StripJournalPrefix(line string) string {
	return journalPrefixRE.ReplaceAllString(line, "")
}

var (
	cipherFailRE = regexp.MustCompile(`(?i)no shared cipher|failed to negotiate|cipher negotiation failed|does not support any cipher|no common cipher|not (?:in|allowed by) (?:the )?--data-ciphers|disallowed cipher`)
	// forward.c: "TCP/UDP packet too large on write to …", "tun packet
	// too large on write"; init.c "Server-pushed tun-mtu is too large";
	// the kernel's EMSGSIZE as strerror.
	tooLargeRE = regexp.MustCompile(`(?i)packet too large|tun-mtu is too large|message too long|EMSGSIZE`)
	// crypto.c: "bad packet ID (may be a replay)"; packet_id.c:
	// "Replay-window backtrack occurred".
	replayRE  = regexp.MustCompile(`bad packet ID|Replay-window backtrack`)
	restartRE = regexp.MustCompile(`SIGUSR1\[|SIGHUP\[|Restart pause|Connection reset, restarting|process restarting`)
	mtuLineRE = regexp.MustCompile(`(?i)mtu|mssfix|MSS`)
)

// ScanLog reads a log like ParseLog and also records, by line, the events
// lint cites. It never fails on content it does not know.
func ScanLog(r io.Reader) (*LogReport, error) {
	rep := &LogReport{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		raw := StripJournalPrefix(sc.Text())
		before := len(rep.SocketBuffers)
		rep.Log.parseLine(raw)
		line := strings.TrimRight(StripTimestamp(raw), " \r")
		add := func(kind string) { rep.Events = append(rep.Events, LogEvent{Line: n, Kind: kind, Text: line}) }
		switch {
		case len(rep.SocketBuffers) > before:
			rep.SocketBufferLines = append(rep.SocketBufferLines, n)
			add(EventSocketBuffers)
		case dataChannelRE.MatchString(line) && !strings.Contains(line, "Outgoing") && !strings.Contains(line, "Incoming"):
			add(EventCipher)
		case cipherFailRE.MatchString(line) && !strings.HasPrefix(line, "Note:"):
			add(EventCipherFail)
		case replayRE.MatchString(line):
			add(EventReplay)
		case tooLargeRE.MatchString(line):
			add(EventTooLarge)
		case strings.Contains(strings.ToLower(line), "compress") && !strings.HasPrefix(line, "Note: --cipher"):
			add(EventCompression)
		case restartRE.MatchString(line):
			add(EventRestart)
		case strings.HasPrefix(line, "DCO version: ") || strings.Contains(line, "data channel offload") || strings.Contains(line, "DCO device"):
			add(EventDCO)
		case mtuLineRE.MatchString(line) && !strings.Contains(line, "PUSH_REPLY"):
			add(EventMTU)
		}
	}
	return rep, sc.Err()
}
