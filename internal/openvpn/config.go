package openvpn

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Limits of OpenVPN's config reader (src/openvpn/options.h, options.c in
// 2.6): read_config_file reads lines with fgets into OPTION_LINE_SIZE+1
// bytes and refuses a line of OPTION_LINE_SIZE characters or more
// (newline included); parse_line keeps at most MAX_PARMS tokens and a token
// of at most OPTION_PARM_SIZE-1 characters.
const (
	MaxLineLen  = 254 // characters on one line, newline excluded
	MaxTokenLen = 255 // characters in one parameter
	MaxParams   = 16  // tokens on one line, the directive name included
)

// Directive is one line of an OpenVPN config: a name and its parameters,
// or an inline block such as <ca>…</ca> whose text is Body.
type Directive struct {
	Name string
	Args []string
	// Inline marks a block <Name>\nBody</Name>; Args is then empty. Body
	// is the block's text, each line ending in "\n".
	Inline bool
	Body   string
}

// D builds a directive from a name and its parameters.
func D(name string, args ...string) Directive { return Directive{Name: name, Args: args} }

// String renders the directive as one config line (or block) without
// checking it; use Config.Render for text that OpenVPN will read.
func (d Directive) String() string {
	var b strings.Builder
	writeDirective(&b, d)
	return strings.TrimSuffix(b.String(), "\n")
}

// key identifies what a directive sets, so that a later directive can
// replace an earlier one: the name, and for push the pushed option's name.
func (d Directive) key() string {
	if d.Name == "push" && len(d.Args) > 0 {
		if f := strings.Fields(d.Args[0]); len(f) > 0 {
			return "push " + f[0]
		}
	}
	return d.Name
}

// Config is an OpenVPN configuration as an ordered list of directives.
// OpenVPN reads it top to bottom; for most options the last occurrence
// wins.
type Config struct {
	Directives []Directive
}

// Add appends a directive.
func (c *Config) Add(name string, args ...string) {
	c.Directives = append(c.Directives, Directive{Name: name, Args: args})
}

// Set replaces every directive with the same key as d (the name, or for
// push the pushed option) by d at the position of the first one, or
// appends d if there is none.
func (c *Config) Set(d Directive) {
	k := d.key()
	out := c.Directives[:0]
	placed := false
	for _, e := range c.Directives {
		if e.key() != k {
			out = append(out, e)
			continue
		}
		if !placed {
			out = append(out, d)
			placed = true
		}
	}
	c.Directives = out
	if !placed {
		c.Directives = append(c.Directives, d)
	}
}

// Remove deletes every directive with this name.
func (c *Config) Remove(name string) {
	out := c.Directives[:0]
	for _, e := range c.Directives {
		if e.Name != name {
			out = append(out, e)
		}
	}
	c.Directives = out
}

// Get returns the last directive with this name, as OpenVPN would use it.
func (c *Config) Get(name string) (Directive, bool) {
	for i := len(c.Directives) - 1; i >= 0; i-- {
		if c.Directives[i].Name == name {
			return c.Directives[i], true
		}
	}
	return Directive{}, false
}

// Clone returns a deep copy.
func (c *Config) Clone() *Config {
	n := &Config{Directives: make([]Directive, len(c.Directives))}
	for i, d := range c.Directives {
		d.Args = append([]string(nil), d.Args...)
		n.Directives[i] = d
	}
	return n
}

// namePattern is what OpenVPN option names look like (tun-mtu,
// tls-crypt-v2, ifconfig-ipv6, <connection>).
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ValidateToken reports whether s may be written as one OpenVPN parameter.
// It refuses everything that could end the parameter or the line early, or
// be read back differently: control characters (newline, CR, NUL, tab …),
// quotes and backslashes, and tokens longer than OpenVPN reads.
func ValidateToken(s string) error {
	if len(s) > MaxTokenLen {
		return fmt.Errorf("parameter is %d characters long, OpenVPN reads at most %d", len(s), MaxTokenLen)
	}
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("parameter %q contains a control character", s)
		case r == '"' || r == '\'':
			return fmt.Errorf("parameter %q contains a quote", s)
		case r == '\\':
			return fmt.Errorf("parameter %q contains a backslash", s)
		}
	}
	return nil
}

// Validate checks that the directive can be written so that OpenVPN reads
// back exactly this directive and nothing else.
func (d Directive) Validate() error {
	if !namePattern.MatchString(d.Name) || len(d.Name) > MaxTokenLen-2 {
		return fmt.Errorf("directive name %q: use lower-case letters, digits and '-'", d.Name)
	}
	if d.Inline {
		if len(d.Args) > 0 {
			return fmt.Errorf("inline block <%s> cannot have parameters", d.Name)
		}
		if d.Body != "" && !strings.HasSuffix(d.Body, "\n") {
			return fmt.Errorf("inline block <%s>: text must end with a newline", d.Name)
		}
		closeTag := "</" + d.Name + ">"
		for _, line := range strings.SplitAfter(d.Body, "\n") {
			if strings.ContainsAny(line, "\x00\r") {
				return fmt.Errorf("inline block <%s> contains a NUL or CR character", d.Name)
			}
			if strings.HasPrefix(strings.TrimLeft(line, " \t\v\f"), closeTag) {
				return fmt.Errorf("inline block <%s> contains its own end tag", d.Name)
			}
			if len(line) > MaxLineLen+1 {
				return fmt.Errorf("inline block <%s> has a line longer than %d characters", d.Name, MaxLineLen)
			}
		}
		return nil
	}
	if d.Body != "" {
		return fmt.Errorf("directive %s has a body but is not an inline block", d.Name)
	}
	if 1+len(d.Args) > MaxParams {
		return fmt.Errorf("%s: %d parameters, OpenVPN reads at most %d", d.Name, len(d.Args), MaxParams-1)
	}
	for _, a := range d.Args {
		if err := ValidateToken(a); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	var b strings.Builder
	writeDirective(&b, d)
	if n := b.Len() - 1; n > MaxLineLen {
		return fmt.Errorf("%s: line is %d characters long, OpenVPN reads at most %d", d.Name, n, MaxLineLen)
	}
	return nil
}

// Render writes the config in OpenVPN's syntax, one directive per line.
// It fails, naming the directive, if any value could be read back by
// OpenVPN as something else (see Directive.Validate).
func (c *Config) Render() (string, error) {
	var b strings.Builder
	for i, d := range c.Directives {
		if err := d.Validate(); err != nil {
			return "", fmt.Errorf("config line %d: %w", i+1, err)
		}
		writeDirective(&b, d)
	}
	return b.String(), nil
}

// writeDirective writes d without checking it. Parameters that contain
// spaces, are empty or would start a comment are double-quoted; Validate
// guarantees they contain no quote or backslash, so no escaping is needed.
func writeDirective(b *strings.Builder, d Directive) {
	if d.Inline {
		fmt.Fprintf(b, "<%s>\n%s</%s>\n", d.Name, d.Body, d.Name)
		return
	}
	b.WriteString(d.Name)
	for _, a := range d.Args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\v\f") || a[0] == '#' || a[0] == ';' {
			b.WriteString(`"` + a + `"`)
		} else {
			b.WriteString(a)
		}
	}
	b.WriteByte('\n')
}

// ParseError names the line of a config that OpenVPN would refuse, and
// when the config came from a file (ReadConfigFile) the file and column.
type ParseError struct {
	Line int
	Msg  string
	File string
	Col  int
}

func (e *ParseError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Parse reads an OpenVPN config file the way OpenVPN 2.6's
// read_config_file and parse_line do: '#' and ';' start a comment where a
// parameter could start, "…" and '…' quote, a backslash escapes a
// backslash, a double quote or white space (not inside '…'), a leading
// "--" on the option name is dropped, a UTF-8 byte-order mark on the first
// line is skipped, and a line holding only <tag> starts an inline block
// that runs to the line starting with </tag>. Lines OpenVPN would refuse
// (bad backslash, unclosed quote, too long, too many parameters) are
// errors here too. CR before a newline is treated as part of the line
// ending. Parse does not judge option names or values.
func Parse(r io.Reader) (*Config, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	c := &Config{}
	lineNum := 0
	for sc.Scan() {
		lineNum++
		line := strings.TrimSuffix(sc.Text(), "\r")
		if lineNum == 1 {
			line = strings.TrimPrefix(line, "\xef\xbb\xbf")
		}
		if strings.IndexByte(line, 0) >= 0 {
			return nil, &ParseError{Line: lineNum, Msg: "NUL character"}
		}
		if len(line) > MaxLineLen {
			return nil, &ParseError{Line: lineNum, Msg: fmt.Sprintf("line is %d characters long, OpenVPN reads at most %d", len(line), MaxLineLen)}
		}
		toks, err := parseLine(line)
		if err != nil {
			return nil, &ParseError{Line: lineNum, Msg: err.Error()}
		}
		if len(toks) == 0 {
			continue
		}
		if len(toks) > MaxParams {
			return nil, &ParseError{Line: lineNum, Msg: fmt.Sprintf("%d parameters, OpenVPN reads at most %d", len(toks)-1, MaxParams-1)}
		}
		if len(toks[0]) >= 3 && strings.HasPrefix(toks[0], "--") {
			toks[0] = toks[0][2:]
		}
		if len(toks) == 1 && len(toks[0]) >= 2 && toks[0][0] == '<' && toks[0][len(toks[0])-1] == '>' {
			name := toks[0][1 : len(toks[0])-1]
			if strings.HasPrefix(name, "/") {
				return nil, &ParseError{Line: lineNum, Msg: strayEndTag(name)}
			}
			closeTag := "</" + name + ">"
			start := lineNum
			var body strings.Builder
			closed := false
			for sc.Scan() {
				lineNum++
				l := strings.TrimSuffix(sc.Text(), "\r")
				if strings.HasPrefix(strings.TrimLeft(l, " \t\v\f\r"), closeTag) {
					closed = true
					break
				}
				if strings.IndexByte(l, 0) >= 0 {
					return nil, &ParseError{Line: lineNum, Msg: "NUL character"}
				}
				body.WriteString(l + "\n")
			}
			if err := sc.Err(); err != nil {
				return nil, err
			}
			if !closed {
				return nil, &ParseError{Line: start, Msg: fmt.Sprintf("end tag %s missing", closeTag)}
			}
			c.Directives = append(c.Directives, Directive{Name: name, Inline: true, Body: body.String()})
			continue
		}
		d := Directive{Name: toks[0]}
		if len(toks) > 1 {
			d.Args = toks[1:]
		}
		c.Directives = append(c.Directives, d)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// strayEndTag is the error for an end tag (name "/key" of a line "</key>")
// outside an inline block: OpenVPN would take it for the start of a block
// named "/key" and look for "<//key>" to the end of the file.
func strayEndTag(name string) string {
	return fmt.Sprintf("end tag <%s> without its start tag <%s>", name, name[1:])
}

// ParseString is Parse over a string.
func ParseString(s string) (*Config, error) { return Parse(strings.NewReader(s)) }

// colError is a tokenizer error at a 1-based column of the line.
type colError struct {
	col int
	msg string
}

func (e *colError) Error() string { return e.msg }

// parseLine splits one line into tokens following OpenVPN 2.6's
// parse_line state machine (options.c).
func parseLine(line string) ([]string, error) {
	toks, _, err := scanLine(line)
	return toks, err
}

// Comments gives, for each line of a config file (as Parse reads it),
// the comment OpenVPN sees on it: the text from the '#' or ';' that
// starts it to the end of the line, "" for none; code reports whether
// an option comes before it on that line. Lines inside an inline block
// (<ca>…</ca>) and lines OpenVPN would refuse have no comment: what
// looks like one there is data.
func Comments(lines []string) (comments []string, code []bool) {
	comments, code = make([]string, len(lines)), make([]bool, len(lines))
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if i == 0 {
			line = strings.TrimPrefix(line, "\xef\xbb\xbf")
		}
		toks, at, err := scanLine(line)
		if err != nil {
			continue
		}
		if at >= 0 {
			comments[i], code[i] = line[at:], len(toks) > 0
		}
		if len(toks) == 1 && len(toks[0]) >= 2 && toks[0][0] == '<' && toks[0][len(toks[0])-1] == '>' && toks[0][1] != '/' {
			closeTag := "</" + toks[0][1:]
			for i+1 < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[i+1], " \t\v\f\r"), closeTag) {
				i++
			}
			i++ // the end tag's line
		}
	}
	return comments, code
}

// scanLine is parseLine that also gives where the line's comment starts
// (-1 without one).
func scanLine(line string) ([]string, int, error) {
	const (
		initial = iota
		quoted
		unquoted
		squoted
	)
	var toks []string
	var parm bytes.Buffer
	state := initial
	backslash := false
	space := func(c byte) bool { return c == 0 || c == ' ' || (c >= '\t' && c <= '\r') }
	// The trailing NUL mirrors the C string terminator, which ends an
	// unquoted token.
	s := line + "\x00"
	for i := 0; i < len(s); i++ {
		in := s[i]
		var out byte
		if !backslash && in == '\\' && state != squoted {
			backslash = true
			continue
		}
		done := false
		switch state {
		case initial:
			if !space(in) {
				if in == ';' || in == '#' {
					return toks, i, nil
				}
				switch {
				case !backslash && in == '"':
					state = quoted
				case !backslash && in == '\'':
					state = squoted
				default:
					out = in
					state = unquoted
				}
			}
		case unquoted:
			if !backslash && space(in) {
				done = true
			} else {
				out = in
			}
		case quoted:
			if !backslash && in == '"' {
				done = true
			} else {
				out = in
			}
		case squoted:
			if in == '\'' {
				done = true
			} else {
				out = in
			}
		}
		if done {
			toks = append(toks, parm.String())
			parm.Reset()
			state = initial
		}
		if backslash && out != 0 && !(out == '\\' || out == '"' || space(out)) {
			return nil, -1, &colError{i, "bad backslash: only \\\\, \\\" and \\ followed by white space are allowed"}
		}
		backslash = false
		if out != 0 {
			if parm.Len() >= MaxTokenLen {
				return nil, -1, &colError{i + 1, fmt.Sprintf("parameter is too long (%d characters max)", MaxTokenLen)}
			}
			parm.WriteByte(out)
		}
	}
	switch state {
	case quoted:
		return nil, -1, &colError{len(line) + 1, `no closing quotation (")`}
	case squoted:
		return nil, -1, &colError{len(line) + 1, `no closing single quotation (')`}
	case unquoted:
		// A backslash before the terminator leaves the token open, as in
		// OpenVPN ("residual parse state").
		return nil, -1, &colError{len(line), "line ends in a backslash"}
	}
	return toks, -1, nil
}
