package openvpn

import (
	"bufio"
	"bytes"
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
	// LongLines counts lines longer than MaxLogLine (read cut short);
	// FirstLongLine is the first one's line number.
	LongLines     int `json:"long_lines,omitempty"`
	FirstLongLine int `json:"first_long_line,omitempty"`
	// counts are the events of each kind, also those beyond the first
	// maxEventsPerKind that Events keeps.
	counts map[string]int
}

// Count returns how many events of this kind were seen.
func (r *LogReport) Count(kind string) int {
	if r.counts != nil {
		return r.counts[kind]
	}
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
	// "Nov 23 10:00:00 " or "2026-11-23T10:00:00": a cheap look before
	// the regexp.
	short := len(line) > 16 && line[0] >= 'A' && line[0] <= 'Z' && line[3] == ' ' && line[9] == ':'
	iso := len(line) > 20 && line[0] >= '0' && line[0] <= '9' && line[4] == '-' && line[10] == 'T'
	if !short && !iso {
		return line
	}
	// The regexp is anchored: give it only the prefix, so that a long
	// line costs no more than a short one.
	if loc := journalPrefixRE.FindStringIndex(line[:min(len(line), 256)]); loc != nil {
		return line[loc[1]:]
	}
	return line
}

// What lint's events are recognised by, matched as plain text (cheap on
// every line of a long log); only the "--data-ciphers" variants of a
// refused cipher need a regexp.
var (
	// Cipher negotiation failures (ssl_ncp.c, ssl.c), in lower case.
	cipherFailText = []string{"no shared cipher", "failed to negotiate", "cipher negotiation failed", "does not support any cipher", "no common cipher", "disallowed cipher"}
	cipherFailRE   = regexp.MustCompile(`(?i)not (?:in|allowed by) (?:the )?--data-ciphers`)
	// forward.c: "TCP/UDP packet too large on write to …", "tun packet
	// too large on write"; init.c "Server-pushed tun-mtu is too large";
	// the kernel's EMSGSIZE as strerror. In lower case.
	tooLargeText = []string{"packet too large", "tun-mtu is too large", "message too long", "emsgsize"}
)

// MaxLogLine is the longest log line read whole. OpenVPN's own lines are
// far shorter; a longer one (a binary blob pasted into the journal) is cut
// here and counted in LongLines, and reading goes on.
const MaxLogLine = 64 << 10

// maxEventsPerKind bounds the events kept per kind (Count still counts
// them all), so that a month of replay warnings does not fill memory.
const maxEventsPerKind = 1000

// readLogLines calls fn with each line of r, without its line ending; a line
// longer than MaxLogLine is cut to it and fn is told so. line is only
// valid during the call.
func readLogLines(r io.Reader, fn func(line []byte, cut bool)) error {
	br := bufio.NewReaderSize(r, 4*MaxLogLine)
	for {
		b, err := br.ReadSlice('\n')
		cut := false
		if err == bufio.ErrBufferFull {
			b = append([]byte(nil), b[:MaxLogLine]...)
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			cut = true
		}
		if len(b) > 0 {
			if b[len(b)-1] == '\n' {
				b = b[:len(b)-1]
			}
			if len(b) > MaxLogLine {
				b, cut = b[:MaxLogLine], true
			}
			fn(b, cut)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lowerASCII writes s in lower case into buf (reused between lines) for
// case-insensitive matching without a regexp.
func lowerASCII(buf []byte, s string) []byte {
	buf = append(buf[:0], s...)
	for i, c := range buf {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return buf
}

func containsAny(b []byte, subs ...string) bool {
	for _, s := range subs {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// ScanLog reads a log like ParseLog and also records, by line, the events
// lint cites. It never fails on content it does not know; a line longer
// than MaxLogLine is read cut short and counted in LongLines.
//
// Each line is first matched against literal text and only then, where
// the literal is found, against the regular expressions: most lines of a
// busy server's log match none, and this keeps reading at tens of MB/s.
func ScanLog(r io.Reader) (*LogReport, error) {
	rep := &LogReport{counts: map[string]int{}}
	n := 0
	var lower []byte
	err := readLogLines(r, func(b []byte, cut bool) {
		n++
		if cut {
			rep.LongLines++
			if rep.FirstLongLine == 0 {
				rep.FirstLongLine = n
			}
		}
		line := strings.TrimRight(StripTimestamp(StripJournalPrefix(string(b))), " \r")
		before := len(rep.SocketBuffers)
		rep.Log.parseStripped(line)
		lower = lowerASCII(lower, line)
		add := func(kind string) {
			rep.counts[kind]++
			if rep.counts[kind] <= maxEventsPerKind {
				rep.Events = append(rep.Events, LogEvent{Line: n, Kind: kind, Text: line})
			}
		}
		switch {
		case len(rep.SocketBuffers) > before:
			rep.SocketBufferLines = append(rep.SocketBufferLines, n)
			add(EventSocketBuffers)
		case strings.Contains(line, "Data Channel: cipher '") && dataChannelRE.MatchString(line) && !strings.Contains(line, "Outgoing") && !strings.Contains(line, "Incoming"):
			add(EventCipher)
		case (containsAny(lower, cipherFailText...) || bytes.Contains(lower, []byte("--data-ciphers")) && cipherFailRE.MatchString(line)) && !strings.HasPrefix(line, "Note:"):
			add(EventCipherFail)
		case strings.Contains(line, "bad packet ID") || strings.Contains(line, "Replay-window backtrack"):
			add(EventReplay)
		case containsAny(lower, tooLargeText...):
			add(EventTooLarge)
		case bytes.Contains(lower, []byte("compress")) && !strings.HasPrefix(line, "Note: --cipher"):
			add(EventCompression)
		case strings.Contains(line, "SIGUSR1[") || strings.Contains(line, "SIGHUP[") || strings.Contains(line, "Restart pause") ||
			strings.Contains(line, "Connection reset, restarting") || strings.Contains(line, "process restarting"):
			add(EventRestart)
		case strings.HasPrefix(line, "DCO version: ") || strings.Contains(line, "data channel offload") || strings.Contains(line, "DCO device"):
			add(EventDCO)
		case containsAny(lower, "mtu", "mss") && !strings.Contains(line, "PUSH_REPLY"):
			add(EventMTU)
		}
	})
	return rep, err
}
