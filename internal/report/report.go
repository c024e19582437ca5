// Package report turns ovpnperf's JSON documents into one self-contained
// HTML page that people look at rather than read: bars with their min–max
// spread, the routed baseline as a reference line, CPU per byte beside the
// rate, each sample's iperf3 intervals as a time series, the published
// figure next to today's, and the host and command that produced them.
//
// The page needs nothing but itself: no script, no external style, font
// or image (a Content-Security-Policy of default-src 'none' says so to the
// browser), so it opens from a file:// URL or an e-mail attachment. Charts
// are small SVG written here (svg.go), with titles, descriptions, axis
// labels with units and a table of the same figures beside each one; the
// stylesheet follows prefers-color-scheme and prints on white.
//
// All markup goes through html/template (page.h, fragment), which escapes
// each value from a document for where it lands; TestInjection sets every
// string of every document type to hostile values and checks the page's
// markup does not change.
//
// Documents are recognised by their "schema" key (Load); each schema has a
// kind that decodes it and writes its section (kinds). A new document type
// adds one entry there. The types are the documents' own (measure, pps,
// pmtu, cryptobench, tunedoc, clusterdoc), never the packages that run the
// cluster or the tune search.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/printable"

	"github.com/ovpnperf/ovpnperf/internal/cluster/clusterdoc"
	"github.com/ovpnperf/ovpnperf/internal/cryptobench"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/shellquote"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// Document is one JSON document read from a file.
type Document struct {
	// File is where it came from (for the page and messages).
	File string
	// Schema is the document's "schema" key (or the one its shape implies,
	// for pps, pmtu and crypto documents written before they carried one).
	Schema string
	// Exactly one of these is set, by the schema's kind.
	Run    *measure.Report
	PPS    *pps.Result
	PMTU   *pmtu.Document
	Crypto *cryptobench.Report
	Tune   *tunedoc.Result
	Probe  *probe.Report
	// Cluster is `cluster status --json`.
	Cluster *clusterdoc.Status
	// Watch is the history `ovpnperf watch --history` keeps (JSON
	// lines, one round a line); WatchCut says its last line was cut.
	Watch    []watchdoc.Round
	WatchCut bool
}

// kind is one schema the report knows: how to decode a document of it.
type kind struct {
	schema string
	decode func(data []byte, d *Document, r Reader) error
}

// kinds are the schemas `ovpnperf report` reads. The section each writes
// is chosen in page.document by which Document field decode set.
var kinds = []kind{
	{measure.Schema, decodeRun},
	{measure.SchemaV1, decodeRun},
	{pps.Schema, func(b []byte, d *Document, _ Reader) error { d.PPS = &pps.Result{}; return json.Unmarshal(b, d.PPS) }},
	{pmtu.Schema, func(b []byte, d *Document, _ Reader) error {
		d.PMTU = &pmtu.Document{}
		return json.Unmarshal(b, d.PMTU)
	}},
	{cryptobench.Schema, func(b []byte, d *Document, _ Reader) error {
		d.Crypto = &cryptobench.Report{}
		return json.Unmarshal(b, d.Crypto)
	}},
	// Version 2 wrote findings as sentences: they are judged again from
	// its verdict and comparisons. Version 1 pooled the rounds; its
	// rounds are judged again.
	{tunedoc.Schema, decodeTune},
	{tunedoc.SchemaV2, decodeTune},
	{tunedoc.SchemaV2Legacy, decodeTune},
	{tunedoc.SchemaV1, decodeTune},
	{probe.Schema, func(b []byte, d *Document, _ Reader) error {
		rep, err := probe.Decode(bytes.NewReader(b))
		d.Probe = rep
		return err
	}},
	{ClusterSchema, decodeCluster},
	{watchdoc.Schema, decodeHistory},
	{clusterdoc.LegacyStatusSchema, decodeCluster},
}

func decodeTune(b []byte, d *Document, r Reader) error {
	res, err := tunedoc.Read(b, r.RejudgeTune)
	if err != nil {
		return err
	}
	d.Tune = res
	return nil
}

func decodeCluster(b []byte, d *Document, _ Reader) error {
	d.Cluster = &clusterdoc.Status{}
	return json.Unmarshal(b, d.Cluster)
}

func decodeRun(b []byte, d *Document, _ Reader) error {
	rep, err := measure.ReadJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if err := rep.CheckRows(); err != nil {
		return err
	}
	d.Run = rep
	return nil
}

// Schemas lists the schemas Load accepts.
func Schemas() []string {
	var s []string
	for _, k := range kinds {
		s = append(s, k.schema)
	}
	return s
}

// ErrUnknownSchema marks a document whose schema no kind reads: a user's
// mistake (wrong file), which the command reports as bad input.
var ErrUnknownSchema = errors.New("unknown schema")

// Reader reads documents. The judging rules of the producers are theirs:
// report reads documents without linking the programs that wrote them, so
// a document that must be judged again is judged by the function given
// here.
type Reader struct {
	// RejudgeTune judges a tune document of schema 1 (which pooled the
	// rounds) again by today's rules: tune.Rejudge. Without it such a
	// document is refused.
	RejudgeTune tunedoc.Rejudger
}

// Load reads the documents of one file with a Reader that judges nothing
// again.
func Load(path string) ([]Document, error) { return Reader{}.Load(path) }

// Parse is Load on data already read.
func Parse(file string, data []byte) ([]Document, error) { return Reader{}.Parse(file, data) }

// Load reads the documents of one file: one document, or a JSON array of
// them (`recipe all --out`).
func (r Reader) Load(path string) ([]Document, error) {
	data, err := inputfile.ReadFile(context.Background(), path, inputfile.Document())
	if err != nil {
		return nil, err
	}
	return r.Parse(path, data)
}

// Parse is Load on data already read; file names it in messages.
func (r Reader) Parse(file string, data []byte) ([]Document, error) {
	trimmed := bytes.TrimSpace(data)
	if isHistory(trimmed) {
		// JSON lines, not one document (watch.go).
		d := Document{File: file, Schema: watchdoc.Schema}
		if err := decodeHistory(trimmed, &d, r); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return []Document{d}, nil
	}
	var raws []json.RawMessage
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, fmt.Errorf("%s: not a JSON array of ovpnperf documents: %w", file, err)
		}
		if len(raws) == 0 {
			return nil, fmt.Errorf("%s: an empty list, no document to show", file)
		}
	} else {
		raws = []json.RawMessage{trimmed}
	}
	var docs []Document
	for i, raw := range raws {
		where := file
		if len(raws) > 1 {
			where = fmt.Sprintf("%s[%d]", file, i)
		}
		d, err := r.parseOne(where, raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

func (r Reader) parseOne(where string, raw []byte) (Document, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil {
		return Document{}, fmt.Errorf("%s: not an ovpnperf JSON document: %w", where, err)
	}
	var schema string
	if s, ok := head["schema"]; ok {
		_ = json.Unmarshal(s, &schema)
	}
	if schema == "" {
		schema = sniff(head)
	}
	d := Document{File: where, Schema: schema}
	for _, k := range kinds {
		if k.schema == schema {
			if err := measure.CheckFigures(raw); err != nil {
				return d, fmt.Errorf("%s: %w", where, err)
			}
			if err := k.decode(raw, &d, r); err != nil {
				return d, fmt.Errorf("%s: %w", where, err)
			}
			return d, nil
		}
	}
	if schema == "" {
		return d, fmt.Errorf("%s: %w: the document has no \"schema\" key (report reads %s)", where, ErrUnknownSchema, strings.Join(Schemas(), ", "))
	}
	return d, fmt.Errorf("%s: %w %q (report reads %s)", where, ErrUnknownSchema, schema, strings.Join(Schemas(), ", "))
}

// sniff names the schema of the pps, pmtu and crypto documents written
// before they carried a "schema" key, and of `cluster status --json`
// (which has none), by keys only they have.
func sniff(head map[string]json.RawMessage) string {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := head[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("aesni_used", "ciphers", "projection"):
		return cryptobench.Schema
	case has("pps_median", "series", "flows"):
		return pps.Schema
	case has("path_mtu", "blackhole", "explanation"):
		return pmtu.Schema
	case has("id", "instances"):
		return clusterdoc.LegacyStatusSchema
	}
	return ""
}

// Options say what goes on the page beyond the documents.
type Options struct {
	// Title heads the page; empty gives one from the documents.
	Title string
	// Argv is the command line that made the page (shown at its foot).
	Argv []string
	// Now stamps the page; zero means time.Now.
	Now time.Time
}

// Write renders docs as one HTML page.
func Write(w io.Writer, docs []Document, opts Options) error {
	p := newPage(opts)
	for i := range docs {
		p.document(&docs[i])
	}
	page, err := p.finish()
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, page)
	return err
}

// WriteFile renders docs into path (0644: a report is meant to be shared).
func WriteFile(path string, docs []Document, opts Options) error {
	var buf bytes.Buffer
	if err := Write(&buf, docs, opts); err != nil {
		return err
	}
	return outputfile.WriteBytes(path, 0o644, buf.Bytes())
}

// page accumulates the HTML of a report.
//
// All markup is written by html/template, which escapes every value for
// the context it lands in (element text, attribute, URL); nothing is
// escaped by hand. A page is made of fragments, each a template that
// starts and ends between elements (html/template refuses one that ends
// inside a tag or an attribute), so the escaped output of one fragment
// can be placed in the body or in another fragment as template.HTML.
type page struct {
	opts  Options
	ids   chartID
	body  strings.Builder
	toc   []tocEntry
	title string
	secN  int
	// err is the first template that failed to execute (a bug: its data
	// do not fit it); Write returns it.
	err error
}

type tocEntry struct{ ID, Text, Extra string }

func newPage(opts Options) *page {
	if opts.Now.IsZero() {
		opts.Now = time.Now().UTC()
	}
	return &page{opts: opts}
}

// funcs format numbers in the templates as the charts and tables print
// them.
var funcs = template.FuncMap{
	"f0": func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1": func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2": func(v float64) string { return fmt.Sprintf("%.2f", v) },
}

// fragment parses a piece of the page's markup; text is the program's
// (a constant), the data it is executed with may come from documents.
func fragment(text string) *template.Template {
	return template.Must(template.New("").Funcs(funcs).Parse(text))
}

// fragments caches the fragments written inline (page.h), by their text.
var fragments sync.Map

// render executes t with data.
func (p *page) render(t *template.Template, data any) template.HTML {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		if p.err == nil {
			p.err = err
		}
		return ""
	}
	return template.HTML(b.String())
}

// h appends the fragment of text, executed with data, to the body.
func (p *page) h(text string, data any) {
	t, ok := fragments.Load(text)
	if !ok {
		t, _ = fragments.LoadOrStore(text, fragment(text))
	}
	p.body.WriteString(string(p.render(t.(*template.Template), data)))
}

// section opens a document's section and lists it in the contents.
func (p *page) section(title, extra string) {
	p.secN++
	id := fmt.Sprintf("doc%d", p.secN)
	p.toc = append(p.toc, tocEntry{id, title, extra})
	if p.title == "" {
		p.title = title
	}
	p.h(`<section class="doc" id="{{.ID}}" aria-labelledby="{{.ID}}-h"><h2 id="{{.ID}}-h">{{.Text}}</h2>`, tocEntry{ID: id, Text: title})
}

func (p *page) document(d *Document) {
	switch {
	case d.Run != nil:
		p.run(d)
	case d.PPS != nil:
		p.pps(d)
	case d.PMTU != nil:
		p.pmtu(d)
	case d.Crypto != nil:
		p.crypto(d)
	case d.Tune != nil:
		p.tune(d)
	case d.Probe != nil:
		p.probeDoc(d)
	case d.Cluster != nil:
		p.clusterDoc(d)
	case d.Watch != nil:
		p.watch(d)
	}
	p.h(`</section>`, nil)
}

// commandLine shows argv as a shell would take it back.
func commandLine(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return strings.TrimSpace(filepath.Base(argv[0]) + " " + shellquote.Join(argv[1:]...))
}

// facts writes a definition list of label/value pairs, skipping empty values.
func (p *page) facts(pairs ...string) {
	var kv [][2]string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			kv = append(kv, [2]string{pairs[i], pairs[i+1]})
		}
	}
	p.h(`<dl class="facts">{{range .}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>`, kv)
}

func (p *page) hostFacts(h hostinfo.Host) {
	aes := "no"
	if h.AESNI {
		aes = "yes"
	}
	ceiling := ""
	if h.EmulationCeiling != nil {
		ceiling = h.EmulationCeiling.Summary
	}
	p.facts("Kernel", strings.TrimSpace(h.Kernel+" "+h.Arch), "CPU", fmt.Sprintf("%s, %d CPUs, AES-NI %s", h.CPUModel, h.CPUs, aes),
		"OpenVPN", h.OpenVPNVersion, "iperf3", h.Iperf3Version, "Link emulation", h.EmulationBackend,
		"Emulator ceiling", ceiling)
}

func (p *page) command(argv []string, fallback string) {
	if cl := commandLine(argv); cl != "" {
		p.h(`<p class="cmd">Command: <code>{{.}}</code></p>`, cl)
	} else if fallback != "" {
		p.h(`<p class="cmd">Command: <code>{{.}}</code> (the document does not record its exact command line)</p>`, fallback)
	}
}

// pageT is the page around the sections. The Content-Security-Policy
// lets the page fetch nothing and run no script: only its own inline
// style applies.
var pageT = fragment(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">` +
	`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">` +
	`<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">` +
	`<title>{{.Title}}</title><style>` + css + `</style></head><body><header><h1>{{.Title}}</h1>` +
	`<p class="made">Made {{.Made}}{{with .Command}} by <code>{{.}}</code>{{end}}.</p>` +
	`{{with .TOC}}<nav aria-label="Contents"><ol>{{range .}}<li><a href="#{{.ID}}">{{.Text}}</a>{{.Extra}}</li>{{end}}</ol></nav>{{end}}` +
	`</header><main>{{.Body}}</main></body></html>`)

func (p *page) finish() (string, error) {
	title := p.opts.Title
	if title == "" {
		title = "ovpnperf report: " + p.title
		if len(p.toc) > 1 {
			title = fmt.Sprintf("ovpnperf report: %d documents", len(p.toc))
		}
	}
	v := struct {
		Title, Made, Command string
		TOC                  []tocEntry
		Body                 template.HTML
	}{Title: title, Made: p.opts.Now.UTC().Format("2006-01-02 15:04 MST"), Command: commandLine(p.opts.Argv), Body: template.HTML(p.body.String())}
	if len(p.toc) > 1 {
		v.TOC = p.toc
	}
	// The page goes through the filter every text output does: a control
	// or text-direction character from a document is escaped (\x1b,
	// \u202e) in a file as on a terminal; html/template escapes markup,
	// not these.
	out := printable.String(string(p.render(pageT, v)))
	return out, p.err
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

// css is the page's only style. Colours are variables that the dark and
// print blocks switch; series colours are distinguishable in both schemes
// and never the only carrier of meaning (labels and tables say it too).
const css = `
:root{--bg:#fff;--fg:#1b1b1f;--muted:#5b5b66;--grid:#e2e2e8;--axis:#6b6b76;--c0:#2a6fdb;--c1:#d9822b;--c2:#2e9d57;--c3:#8e5bd0;--c4:#c8455a;--c5:#1f9bb0;--ref:#c0392b;--pub:#111;--ok:#1e7b34;--bad:#b3261e;--warn:#8a6100;--panel:#f5f6f8}
@media (prefers-color-scheme:dark){:root{--bg:#15161a;--fg:#e7e7ea;--muted:#a4a4ae;--grid:#2d2e35;--axis:#8d8d97;--c0:#6ea8ff;--c1:#f0a35a;--c2:#5fd08a;--c3:#b892f5;--c4:#f07b8d;--c5:#5fd0e3;--ref:#ff7b6b;--pub:#fafafa;--ok:#6bd58a;--bad:#ff8a80;--warn:#e8c060;--panel:#1e2026}}
*{box-sizing:border-box}
body{background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1180px;padding:1rem 1.25rem 3rem}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.3rem;border-bottom:2px solid var(--grid);padding-bottom:.2rem;margin-top:2.2rem}h3{font-size:1.1rem;margin:1.6rem 0 .4rem}h4{font-size:1rem;margin:1rem 0 .3rem}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.88em;background:var(--panel);padding:.05rem .25rem;border-radius:3px;overflow-wrap:anywhere}
.made,.cmd{color:var(--muted)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;margin:.5rem 0;background:var(--panel);padding:.5rem .8rem;border-radius:6px}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border-bottom:1px solid var(--grid);padding:.2rem .55rem;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:.4rem 0}
.charts{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:flex-start}
.series-grid{display:flex;flex-wrap:wrap;gap:.3rem 1rem}
svg.chart{max-width:100%;height:auto;color:var(--fg);font-size:12px;overflow:visible}
svg text{fill:currentColor}
.ctitle{font-weight:600;font-size:13px}.tick,.note,.legend,.reflabel{font-size:11px}.tick{fill:var(--muted)}
.axislabel{font-size:12px;fill:var(--muted)}
.grid{stroke:var(--grid);stroke-width:1}.axis{stroke:var(--axis);stroke-width:1}
.whisker{stroke:var(--fg);stroke-width:1.3;fill:none}
.ref{stroke:var(--ref);stroke-width:2;stroke-dasharray:5 3}.reflabel{fill:var(--ref)}
.pub{fill:var(--pub);stroke:var(--bg);stroke-width:1}
rect.s0,line.s0{fill:var(--c0);stroke:var(--c0)}rect.s1,line.s1{fill:var(--c1);stroke:var(--c1)}rect.s2,line.s2{fill:var(--c2);stroke:var(--c2)}rect.s3,line.s3{fill:var(--c3);stroke:var(--c3)}rect.s4,line.s4{fill:var(--c4);stroke:var(--c4)}rect.s5,line.s5{fill:var(--c5);stroke:var(--c5)}
rect.pubbar{fill:none;stroke:var(--pub);stroke-dasharray:3 2}
path.line{fill:none;stroke-width:1.8}path.s0{stroke:var(--c0)}path.s1{stroke:var(--c1)}path.s2{stroke:var(--c2)}path.s3{stroke:var(--c3)}path.s4{stroke:var(--c4)}path.s5{stroke:var(--c5)}
circle.s0{fill:var(--c0)}circle.s1{fill:var(--c1)}circle.s2{fill:var(--c2)}circle.s3{fill:var(--c3)}circle.s4{fill:var(--c4)}circle.s5{fill:var(--c5)}
path.ceil,line.ceil{stroke-dasharray:6 4;stroke-width:1.5}
circle.hollow{fill:var(--bg);stroke-width:1.3}circle.hollow.s0{stroke:var(--c0)}circle.hollow.s1{stroke:var(--c1)}circle.hollow.s2{stroke:var(--c2)}
.verdict{font-weight:600}.v-confirmed,.v-better{color:var(--ok)}.v-refuted,.v-worse{color:var(--bad)}.v-changed,.v-noise,.v-cannot-tell{color:var(--warn)}
.findings li{margin:.2rem 0}.invalid{color:var(--bad)}.muted{color:var(--muted)}
nav ol{columns:2;font-size:.92rem}
details summary{cursor:pointer;color:var(--muted)}
@media print{:root{--bg:#fff;--fg:#000;--muted:#333;--grid:#ccc;--axis:#444;--panel:#f3f3f3;--pub:#000}body{max-width:none;font-size:11pt}section.doc{break-before:page}section.doc:first-of-type{break-before:auto}svg.chart,table,figure{break-inside:avoid}details{display:block}details>*{display:block}nav{display:none}a{color:inherit;text-decoration:none}}
`
