package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// Status is what an OpenVPN status file (--status FILE) says.
type Status struct {
	// Version is the status-version the file is written in (1, 2 or 3),
	// told from its first line; 0 for the statistics a client or
	// point-to-point process writes ("OpenVPN STATISTICS"), which has no
	// version.
	Version int
	// Clients are a server's connected clients, one per row.
	Clients []StatusClient
	// Counters are the named figures: a client's "TCP/UDP read bytes" …,
	// a server's global stats.
	Counters map[string]int64
}

// StatusClient is one row of a server's client list.
type StatusClient struct {
	CommonName, RealAddress string
	// BytesReceived and BytesSent are what the server received from and
	// sent to the client on its transport (OpenVPN's link bytes).
	BytesReceived, BytesSent uint64
}

// ErrIncomplete says the file does not end with "END": OpenVPN rewrites the
// status file in place, and a read can meet it half written.
var ErrIncomplete = errors.New("status file without its END line (being rewritten?)")

// ParseStatus reads a status file in any of the formats OpenVPN 2.6 writes:
// status-version 1 (the default: "OpenVPN CLIENT LIST", comma-separated
// sections), 2 (comma-separated, typed rows with HEADER lines), 3 (as 2,
// tab-separated) and a client's "OpenVPN STATISTICS".
func ParseStatus(b []byte) (*Status, error) {
	lines := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	if len(lines) == 0 || lines[0] == "" {
		return nil, errors.New("empty status file")
	}
	if lines[len(lines)-1] != "END" {
		return nil, ErrIncomplete
	}
	switch first := lines[0]; {
	case first == "OpenVPN CLIENT LIST":
		return parseStatusV1(lines)
	case strings.HasPrefix(first, "TITLE,"), strings.HasPrefix(first, "TITLE\t"):
		st := &Status{Version: 2}
		if strings.HasPrefix(first, "TITLE\t") {
			st.Version = 3
		}
		// openvpn.ParseStatus reads the management interface's
		// `status 3`, which is the file's format 3; format 2 differs only
		// in the separator, which it takes as well.
		ps := openvpn.ParseStatus(lines)
		st.Counters = ps.Counters
		for i, row := range ps.Clients {
			c, err := statusClient(row)
			if err != nil {
				return nil, fmt.Errorf("client row %d: %w", i+1, err)
			}
			st.Clients = append(st.Clients, c)
		}
		return st, nil
	case first == "OpenVPN STATISTICS":
		st := &Status{Counters: map[string]int64{}}
		for _, line := range lines[1 : len(lines)-1] {
			k, v, ok := strings.Cut(line, ",")
			if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
				st.Counters[k] = n
			}
		}
		return st, nil
	default:
		return nil, fmt.Errorf("not an OpenVPN status file: first line %q", truncate(first, 60))
	}
}

// parseStatusV1 reads the sections of status-version 1: CLIENT LIST with
// its column line, ROUTING TABLE, GLOBAL STATS.
func parseStatusV1(lines []string) (*Status, error) {
	st := &Status{Version: 1, Counters: map[string]int64{}}
	section := "CLIENT LIST"
	var cols []string
	for _, line := range lines[1 : len(lines)-1] {
		switch line {
		case "ROUTING TABLE", "GLOBAL STATS":
			section = line
			continue
		}
		f := strings.Split(line, ",")
		switch {
		case section == "CLIENT LIST" && f[0] == "Updated":
		case section == "CLIENT LIST" && cols == nil:
			cols = f
		case section == "CLIENT LIST":
			row := map[string]string{}
			for i, c := range cols {
				if i < len(f) {
					row[c] = f[i]
				}
			}
			c, err := statusClient(row)
			if err != nil {
				return nil, fmt.Errorf("client row %q: %w", truncate(line, 80), err)
			}
			st.Clients = append(st.Clients, c)
		case section == "GLOBAL STATS" && len(f) == 2:
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				st.Counters[f[0]] = n
			}
		}
	}
	if cols == nil {
		return nil, errors.New("status-version 1 file without its client list header")
	}
	return st, nil
}

// statusClient reads a client row keyed by the header's column names.
func statusClient(row map[string]string) (StatusClient, error) {
	c := StatusClient{CommonName: row["Common Name"], RealAddress: row["Real Address"]}
	var err error
	if c.BytesReceived, err = strconv.ParseUint(row["Bytes Received"], 10, 64); err != nil {
		return c, fmt.Errorf("Bytes Received %q: not a count", truncate(row["Bytes Received"], 30))
	}
	if c.BytesSent, err = strconv.ParseUint(row["Bytes Sent"], 10, 64); err != nil {
		return c, fmt.Errorf("Bytes Sent %q: not a count", truncate(row["Bytes Sent"], 30))
	}
	return c, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// statusOptions finds, in OpenVPN's command line, the options that say
// where its status file is: --status FILE [N], --status-version N, --dev
// and --cd, following --config (or a lone config file argument) into the
// file, read by readConfig. Later options win, as in OpenVPN.
type statusOptions struct {
	Status, Dev, Cd string
	Version         int
}

func parseCmdline(argv []string, readConfig func(path string) ([]byte, error)) (statusOptions, error) {
	var o statusOptions
	apply := func(name string, args []string) error {
		switch name {
		case "status":
			if len(args) > 0 {
				o.Status = args[0]
			}
		case "status-version":
			if len(args) > 0 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 || n > 3 {
					return fmt.Errorf("status-version %q", args[0])
				}
				o.Version = n
			}
		case "dev":
			if len(args) > 0 {
				o.Dev = args[0]
			}
		case "cd":
			if len(args) > 0 {
				o.Cd = args[0]
			}
		}
		return nil
	}
	config := func(path string) error {
		b, err := readConfig(path)
		if err != nil {
			return err
		}
		cfg, err := openvpn.Parse(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		for _, d := range cfg.Directives {
			if err := apply(d.Name, d.Args); err != nil {
				return fmt.Errorf("config %s: %w", path, err)
			}
		}
		return nil
	}
	args := argv
	if len(args) > 0 {
		args = args[1:]
	}
	// `openvpn FILE`: a single argument that is not an option is a config.
	if len(args) == 1 && !strings.HasPrefix(args[0], "--") {
		return o, config(args[0])
	}
	for i := 0; i < len(args); {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			i++
			continue
		}
		j := i + 1
		for j < len(args) && !strings.HasPrefix(args[j], "--") {
			j++
		}
		if name == "config" && j > i+1 {
			if err := config(args[i+1]); err != nil {
				return o, err
			}
		} else if err := apply(name, args[i+1:j]); err != nil {
			return o, err
		}
		i = j
	}
	return o, nil
}
