package openvpn

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Pos is where a directive starts: file, 1-based line and column.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// PosDirective is a directive with the place it was read from. For an
// inline block, EndLine is the line of its end tag.
type PosDirective struct {
	Directive
	Pos     Pos
	EndLine int
}

// ConfigFile is a config file as read from disk, with the files it
// includes through `config` expanded in place.
type ConfigFile struct {
	// Path is the file as given; Lines are its lines without line
	// endings (the text --fix edits; inline key material is in there, so
	// never print Lines).
	Path  string
	Lines []string
	// Directives are all directives in the order OpenVPN applies them:
	// an included file's directives stand where its `config` line is
	// (the `config` directive itself is kept, before them).
	Directives []PosDirective
	// Includes are the files read through `config`, in order.
	Includes []*ConfigFile
}

// Config returns the directives without positions, as the rest of the
// package models a config.
func (f *ConfigFile) Config() *Config {
	c := &Config{}
	for _, d := range f.Directives {
		c.Directives = append(c.Directives, d.Directive)
	}
	return c
}

// ParseError's file and column form, used by ReadConfigFile.
func (e *ParseError) at(file string, col int) *ParseError {
	e.File, e.Col = file, col
	return e
}

// maxIncludeDepth is read_config_file's max_recursive_levels (options.c).
const maxIncludeDepth = 10

// ReadConfigFile reads an OpenVPN config file and every file it includes
// with `config FILE`. OpenVPN itself opens an included file relative to
// its working directory; the Debian/systemd units start it in the
// config's directory (--cd), so a relative name is resolved against the
// directory of the file that names it. An include loop, a missing
// include or more than 10 levels are errors naming the `config` line.
// A file whose name ends in .gz is decompressed (Debian ships its sample
// configs that way).
func ReadConfigFile(path string) (*ConfigFile, error) {
	return readConfigFile(path, nil, 1)
}

func readConfigFile(path string, stack []string, depth int) (*ConfigFile, error) {
	data, err := inputfile.ReadFile(context.Background(), path, inputfile.Config())
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// The decompressed text has the same cap as a plain config.
		var b bytes.Buffer
		if _, err := b.ReadFrom(io.LimitReader(zr, inputfile.Config().Max+1)); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if int64(b.Len()) > inputfile.Config().Max {
			return nil, usage.Wrap(&inputfile.Error{Path: path, Kind: inputfile.Config(), Err: inputfile.ErrTooLarge})
		}
		data = b.Bytes()
	}
	f, err := ParseConfigText(path, data)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	stack = append(stack, abs)
	var out []PosDirective
	for _, d := range f.Directives {
		out = append(out, d)
		if d.Name != "config" || d.Inline || len(d.Args) != 1 {
			continue
		}
		inc := d.Args[0]
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		incAbs, _ := filepath.Abs(inc)
		for _, s := range stack {
			if s == incAbs {
				return nil, (&ParseError{Line: d.Pos.Line, Msg: fmt.Sprintf("config %s includes itself (loop through %s)", d.Args[0], strings.Join(stack, " -> "))}).at(path, d.Pos.Col)
			}
		}
		if depth >= maxIncludeDepth {
			return nil, (&ParseError{Line: d.Pos.Line, Msg: fmt.Sprintf("more than %d levels of config includes", maxIncludeDepth)}).at(path, d.Pos.Col)
		}
		sub, err := readConfigFile(inc, stack, depth+1)
		if err != nil {
			if _, ok := err.(*ParseError); ok {
				return nil, err
			}
			if errors.Is(err, inputfile.ErrNotRegular) || errors.Is(err, inputfile.ErrTooLarge) {
				// Not a config OpenVPN could read either, but
				// first of all a file no one should hand to a
				// reader: refused like the file on the command line.
				return nil, usage.Errorf("%s:%d: config %s: %v", path, d.Pos.Line, d.Args[0], err)
			}
			return nil, (&ParseError{Line: d.Pos.Line, Msg: fmt.Sprintf("cannot read included config: %v", err)}).at(path, d.Pos.Col)
		}
		f.Includes = append(f.Includes, sub)
		out = append(out, sub.Directives...)
	}
	f.Directives = out
	return f, nil
}

// ParseConfigText parses one file's text like Parse, keeping each
// directive's position; name is the file name used in positions and
// errors. It does not follow `config` includes.
func ParseConfigText(name string, data []byte) (*ConfigFile, error) {
	text := string(data)
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	f := &ConfigFile{Path: name, Lines: lines}
	perr := func(line, col int, msg string) error {
		return (&ParseError{Line: line, Msg: msg}).at(name, col)
	}
	for i := 0; i < len(lines); i++ {
		lineNum := i + 1
		line := strings.TrimSuffix(lines[i], "\r")
		if i == 0 {
			line = strings.TrimPrefix(line, "\xef\xbb\xbf")
		}
		if k := strings.IndexByte(line, 0); k >= 0 {
			return nil, perr(lineNum, k+1, "NUL character")
		}
		if len(line) > MaxLineLen {
			return nil, perr(lineNum, MaxLineLen+1, fmt.Sprintf("line is %d characters long, OpenVPN reads at most %d", len(line), MaxLineLen))
		}
		toks, err := parseLine(line)
		if err != nil {
			col := 1
			if ce, ok := err.(*colError); ok {
				col = ce.col
			}
			return nil, perr(lineNum, col, err.Error())
		}
		if len(toks) == 0 {
			continue
		}
		col := strings.IndexFunc(line, func(r rune) bool { return !(r == ' ' || (r >= '\t' && r <= '\r')) }) + 1
		if len(toks) > MaxParams {
			return nil, perr(lineNum, col, fmt.Sprintf("%d parameters, OpenVPN reads at most %d", len(toks)-1, MaxParams-1))
		}
		if len(toks[0]) >= 3 && strings.HasPrefix(toks[0], "--") {
			toks[0] = toks[0][2:]
		}
		pos := Pos{File: name, Line: lineNum, Col: col}
		if len(toks) == 1 && len(toks[0]) >= 2 && toks[0][0] == '<' && toks[0][len(toks[0])-1] == '>' {
			tag := toks[0][1 : len(toks[0])-1]
			if strings.HasPrefix(tag, "/") {
				return nil, perr(lineNum, col, strayEndTag(tag))
			}
			closeTag := "</" + tag + ">"
			var body strings.Builder
			closed := false
			for i+1 < len(lines) {
				i++
				l := strings.TrimSuffix(lines[i], "\r")
				if strings.HasPrefix(strings.TrimLeft(l, " \t\v\f\r"), closeTag) {
					closed = true
					break
				}
				if k := strings.IndexByte(l, 0); k >= 0 {
					return nil, perr(i+1, k+1, "NUL character")
				}
				body.WriteString(l + "\n")
			}
			if !closed {
				return nil, perr(lineNum, col, fmt.Sprintf("end tag %s missing", closeTag))
			}
			f.Directives = append(f.Directives, PosDirective{Directive: Directive{Name: tag, Inline: true, Body: body.String()}, Pos: pos, EndLine: i + 1})
			continue
		}
		d := Directive{Name: toks[0]}
		if len(toks) > 1 {
			d.Args = toks[1:]
		}
		f.Directives = append(f.Directives, PosDirective{Directive: d, Pos: pos, EndLine: lineNum})
	}
	return f, nil
}
