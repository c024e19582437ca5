package openvpn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The management interface (doc/management-notes.txt) speaks lines of
// text. Replies to a command are either one line "SUCCESS: …" or
// "ERROR: …", or several lines ending in "END". Lines starting with '>'
// are real-time notifications (>INFO:, >STATE:, >LOG:, >BYTECOUNT:,
// >HOLD:, >FATAL: …) and may arrive between any two lines.

// LineKind classifies a management-interface line.
type LineKind int

// Kinds of management lines.
const (
	LineData         LineKind = iota // a line of a multi-line reply
	LineSuccess                      // "SUCCESS: text"
	LineError                        // "ERROR: text"
	LineEnd                          // "END", closing a multi-line reply
	LineNotification                 // ">TYPE:text"
)

// MgmtLine is one parsed management-interface line. For notifications Type
// is the word between '>' and ':' ("INFO", "STATE"); Text is the rest of
// the line after the marker, trimmed of the line ending.
type MgmtLine struct {
	Kind LineKind
	Type string
	Text string
}

// ParseMgmtLine classifies one line read from the management socket. It
// accepts any input.
func ParseMgmtLine(line string) MgmtLine {
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, ">"):
		typ, text, ok := strings.Cut(line[1:], ":")
		if !ok {
			return MgmtLine{Kind: LineNotification, Text: line[1:]}
		}
		return MgmtLine{Kind: LineNotification, Type: typ, Text: text}
	case strings.HasPrefix(line, "SUCCESS:"):
		return MgmtLine{Kind: LineSuccess, Text: strings.TrimSpace(line[len("SUCCESS:"):])}
	case strings.HasPrefix(line, "ERROR:"):
		return MgmtLine{Kind: LineError, Text: strings.TrimSpace(line[len("ERROR:"):])}
	case line == "END":
		return MgmtLine{Kind: LineEnd}
	}
	return MgmtLine{Kind: LineData, Text: line}
}

// Management is a connection to OpenVPN's management interface on a unix
// socket. OpenVPN serves one connection at a time. Methods are safe for
// concurrent use; commands are sent one after another.
type Management struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	// Banner is the >INFO: line OpenVPN greets with.
	Banner string
	// Notifications keeps the last real-time notifications seen while
	// reading replies (at most maxNotifications).
	notes []MgmtLine
}

const maxNotifications = 100

// maxMgmtLine bounds one line from the socket; OpenVPN's longest lines
// (status rows) are far shorter.
const maxMgmtLine = 64 * 1024

// DialManagement connects to the unix socket at path and reads the banner.
func DialManagement(ctx context.Context, path string) (*Management, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connecting to OpenVPN management socket: %w", err)
	}
	m := &Management{conn: conn, r: bufio.NewReaderSize(conn, 4096)}
	m.setDeadline(ctx)
	for {
		l, err := m.readLine()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("reading management banner from %s: %w", path, err)
		}
		if l.Kind == LineNotification && l.Type == "INFO" {
			m.Banner = l.Text
			return m, nil
		}
		m.note(l)
	}
}

// Close closes the connection; OpenVPN keeps running.
func (m *Management) Close() error { return m.conn.Close() }

// Notifications returns the real-time notifications seen so far.
func (m *Management) Notifications() []MgmtLine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MgmtLine(nil), m.notes...)
}

func (m *Management) note(l MgmtLine) {
	if len(m.notes) >= maxNotifications {
		m.notes = m.notes[1:]
	}
	m.notes = append(m.notes, l)
}

func (m *Management) setDeadline(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	_ = m.conn.SetDeadline(dl)
}

func (m *Management) readLine() (MgmtLine, error) {
	var b []byte
	for {
		frag, isPrefix, err := m.r.ReadLine()
		if err != nil {
			return MgmtLine{}, err
		}
		b = append(b, frag...)
		if len(b) > maxMgmtLine {
			return MgmtLine{}, errors.New("management line too long")
		}
		if !isPrefix {
			return ParseMgmtLine(string(b)), nil
		}
	}
}

// MgmtError is an "ERROR: …" reply.
type MgmtError struct {
	Command string
	Msg     string
}

func (e *MgmtError) Error() string {
	return fmt.Sprintf("OpenVPN management command %q: %s", e.Command, e.Msg)
}

// Command sends one command line and returns its reply: the text of a
// SUCCESS line as the only element, or the lines of a multi-line reply
// without the END. An ERROR reply is a *MgmtError.
func (m *Management) Command(ctx context.Context, cmd string) ([]string, error) {
	if strings.ContainsAny(cmd, "\r\n\x00") {
		return nil, fmt.Errorf("management command %q contains a line break", cmd)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setDeadline(ctx)
	if _, err := m.conn.Write([]byte(cmd + "\n")); err != nil {
		return nil, fmt.Errorf("management command %q: %w", cmd, err)
	}
	var lines []string
	for {
		l, err := m.readLine()
		if err != nil {
			return nil, fmt.Errorf("management command %q: %w", cmd, err)
		}
		switch l.Kind {
		case LineNotification:
			m.note(l)
		case LineSuccess:
			if lines == nil {
				return []string{l.Text}, nil
			}
			lines = append(lines, "SUCCESS: "+l.Text)
		case LineError:
			if lines == nil {
				return nil, &MgmtError{Command: cmd, Msg: l.Text}
			}
			lines = append(lines, "ERROR: "+l.Text)
		case LineEnd:
			if lines == nil {
				lines = []string{}
			}
			return lines, nil
		case LineData:
			lines = append(lines, l.Text)
		}
	}
}

// State is one line of the `state` command:
// time,state,description,tun IPv4,remote address,remote port,local
// address,local port,tun IPv6.
type State struct {
	Time        time.Time
	Name        string // CONNECTING, WAIT, AUTH, GET_CONFIG, ASSIGN_IP, ADD_ROUTES, CONNECTED, RECONNECTING, EXITING …
	Description string
	TunIPv4     string
	Remote      string
	RemotePort  string
	Local       string
	LocalPort   string
	TunIPv6     string
}

// ParseState reads one `state` reply line.
func ParseState(line string) (State, error) {
	f := strings.Split(line, ",")
	if len(f) < 2 {
		return State{}, fmt.Errorf("state line %q: too few fields", line)
	}
	sec, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return State{}, fmt.Errorf("state line %q: bad time", line)
	}
	get := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	return State{Time: time.Unix(sec, 0), Name: f[1], Description: get(2), TunIPv4: get(3), Remote: get(4),
		RemotePort: get(5), Local: get(6), LocalPort: get(7), TunIPv6: get(8)}, nil
}

// State returns OpenVPN's current state.
func (m *Management) State(ctx context.Context) (State, error) {
	lines, err := m.Command(ctx, "state")
	if err != nil {
		return State{}, err
	}
	if len(lines) == 0 {
		return State{}, errors.New("management command \"state\": empty reply")
	}
	return ParseState(lines[len(lines)-1])
}

// Status is the reply to `status 3` (tab-separated). A server lists its
// clients; a client lists its traffic counters.
type Status struct {
	Title string
	// Clients are the server's CLIENT_LIST rows keyed by the HEADER's
	// column names ("Common Name", "Real Address", "Bytes Received",
	// "Bytes Sent", "Virtual Address", "Data Channel Cipher" …).
	Clients []map[string]string
	// Counters are a client's "name<TAB>value" rows ("TUN/TAP read
	// bytes", "TCP/UDP write bytes" …) and a server's GLOBAL_STATS.
	Counters map[string]int64
	// Lines is the whole reply.
	Lines []string
}

// ParseStatus reads the lines of a `status 3` reply.
func ParseStatus(lines []string) *Status {
	s := &Status{Counters: map[string]int64{}, Lines: lines}
	headers := map[string][]string{}
	for _, line := range lines {
		f := strings.Split(line, "\t")
		if len(f) == 1 {
			// `status 3` of a client falls back to commas for its counters.
			f = strings.Split(line, ",")
		}
		switch f[0] {
		case "TITLE":
			if len(f) > 1 {
				s.Title = f[1]
			}
		case "HEADER":
			if len(f) > 1 {
				headers[f[1]] = f[2:]
			}
		case "CLIENT_LIST":
			row := map[string]string{}
			for i, col := range headers["CLIENT_LIST"] {
				if i+1 < len(f) {
					row[col] = f[i+1]
				}
			}
			s.Clients = append(s.Clients, row)
		case "GLOBAL_STATS":
			if len(f) == 3 {
				if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
					s.Counters[f[1]] = n
				}
			}
		default:
			if len(f) == 2 {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					s.Counters[f[0]] = n
				}
			}
		}
	}
	return s
}

// Status runs `status 3`.
func (m *Management) Status(ctx context.Context) (*Status, error) {
	lines, err := m.Command(ctx, "status 3")
	if err != nil {
		return nil, err
	}
	return ParseStatus(lines), nil
}

// LoadStats is the reply to `load-stats`: connected clients (servers
// only) and the bytes OpenVPN read from and wrote to its transport
// socket.
type LoadStats struct {
	Clients  int
	BytesIn  int64
	BytesOut int64
}

// ParseLoadStats reads "nclients=1,bytesin=5342,bytesout=4983".
func ParseLoadStats(s string) (LoadStats, error) {
	var ls LoadStats
	seen := 0
	for _, kv := range strings.Split(strings.TrimSpace(s), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return LoadStats{}, fmt.Errorf("load-stats %q: bad value for %s", s, k)
		}
		switch k {
		case "nclients":
			ls.Clients = int(n)
			seen++
		case "bytesin":
			ls.BytesIn = n
			seen++
		case "bytesout":
			ls.BytesOut = n
			seen++
		}
	}
	if seen != 3 {
		return LoadStats{}, fmt.Errorf("load-stats %q: want nclients, bytesin and bytesout", s)
	}
	return ls, nil
}

// LoadStats runs `load-stats`.
func (m *Management) LoadStats(ctx context.Context) (LoadStats, error) {
	lines, err := m.Command(ctx, "load-stats")
	if err != nil {
		return LoadStats{}, err
	}
	if len(lines) != 1 {
		return LoadStats{}, fmt.Errorf("load-stats: unexpected reply %q", strings.Join(lines, "\n"))
	}
	return ParseLoadStats(lines[0])
}

// Signal sends `signal SIG` (SIGHUP, SIGTERM, SIGUSR1, SIGUSR2). After
// SIGTERM OpenVPN exits and closes the connection.
func (m *Management) Signal(ctx context.Context, sig string) error {
	switch sig {
	case "SIGHUP", "SIGTERM", "SIGUSR1", "SIGUSR2":
	default:
		return fmt.Errorf("management signal %q: use SIGHUP, SIGTERM, SIGUSR1 or SIGUSR2", sig)
	}
	_, err := m.Command(ctx, "signal "+sig)
	return err
}
