package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// hostile are values a document could carry to break out of the page:
// markup that closes a script, an attribute (single or double quoted) or
// an element and opens one with a handler; a script URL; template syntax,
// a NUL and a newline. The markup is one value (each part of it would
// break out on its own) so that a page is rendered four times per field;
// every value is shorter than the 80 characters above which a row's extra
// figures are left out, like the benign one.
var hostile = []string{
	`</script><script>alert(1)</script>'"><img src=x onerror=alert(1)>`,
	`javascript:alert(1)`,
	"{{.}}\x00a\nb",
}

// benign is what a string is set to for the reference page: a value no
// renderer treats specially, like the hostile ones.
const benign = "plainvalue"

// injectCase is one kind of page: how to make a fresh, fully populated
// root (every pointer set, every list and map of something with text in
// it non-empty) and how to render it.
type injectCase struct {
	name   string
	root   func(t *testing.T) any
	render func(root any) ([]byte, error)
}

type reportRoot struct {
	Docs []Document
	Opts Options
}

type compareRoot struct {
	Cmp      Comparison
	Old, New *measure.Report
	Opts     Options
}

func parseFile(t *testing.T, path string) []Document {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse(filepath.Base(path), data)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func reportCase(name string, docs func(t *testing.T) []Document) injectCase {
	return injectCase{name,
		func(t *testing.T) any {
			r := &reportRoot{Docs: docs(t), Opts: Options{Title: "t", Argv: []string{"ovpnperf", "report", "x.json"}}}
			// Every document stays; what is in each is shortened.
			for i := range r.Docs {
				trim(reflect.ValueOf(&r.Docs[i]).Elem(), 0)
			}
			fill(reflect.ValueOf(r).Elem(), 0)
			return r
		},
		func(root any) ([]byte, error) {
			r := root.(*reportRoot)
			var b bytes.Buffer
			err := Write(&b, r.Docs, r.Opts)
			return b.Bytes(), err
		}}
}

// injectCases are every document type report and compare render.
func injectCases() []injectCase {
	return []injectCase{
		reportCase("run", func(t *testing.T) []Document { return parseFile(t, filepath.Join("testdata", "labrun-default.json")) }),
		// Recipes with verdicts, published figures and their own charts.
		reportCase("recipe", func(t *testing.T) []Document {
			all := parseFile(t, filepath.Join("testdata", "recipe-all.json"))
			var out []Document
			for _, d := range all {
				switch d.Run.Scenario.Command {
				case "recipe buffers", "recipe fragment", "recipe pps":
					out = append(out, d)
				}
			}
			return out
		}),
		reportCase("bench", benchDocs), // crypto, pps, pmtu
		reportCase("tune", func(t *testing.T) []Document { return parseFile(t, filepath.Join("testdata", "tune-lossy.json")) }),
		reportCase("cluster", func(t *testing.T) []Document { return parseFile(t, filepath.Join("testdata", "cluster-status.json")) }),
		reportCase("watch", func(t *testing.T) []Document { return parseFile(t, filepath.Join("testdata", "watch-history.jsonl")) }),
		{"compare",
			func(t *testing.T) any {
				a := parseFile(t, filepath.Join("testdata", "labrun-wan-1.json"))[0].Run
				b := parseFile(t, filepath.Join("testdata", "labrun-wan-2.json"))[0].Run
				r := &compareRoot{Cmp: NewComparison("wan-1.json", a, "wan-2.json", b, CompareOptions{}), Old: a, New: b, Opts: Options{Argv: []string{"ovpnperf", "compare"}}}
				trim(reflect.ValueOf(r).Elem(), 0)
				fill(reflect.ValueOf(r).Elem(), 0)
				return r
			},
			func(root any) ([]byte, error) {
				r := root.(*compareRoot)
				var b bytes.Buffer
				err := WriteCompareHTML(&b, r.Cmp, r.Old, r.New, r.Opts)
				return b.Bytes(), err
			}},
	}
}

// TestInjection sets every string of every document type report renders
// (struct fields, list elements, map keys and values, strings inside
// free-form maps), one at a time, to each hostile value, and checks that
// the page has exactly the elements and attributes it has with a benign
// value there: no value adds markup, an event handler or a script URL.
// The strings are found by reflection, so a new field is covered without
// a change here.
func TestInjection(t *testing.T) {
	t.Parallel()
	for _, c := range injectCases() {
		t.Run(c.name, func(t *testing.T) {
			proto := c.root(t)
			all := stringsOf(proto)
			// A field is set wherever it occurs (every row's variant),
			// one field at a time.
			var fields []string
			seen := map[string]bool{}
			for _, l := range all {
				if f := fieldOf(l.path); !seen[f] {
					seen[f] = true
					fields = append(fields, f)
				}
			}
			if len(fields) == 0 {
				t.Fatal("no string found to set")
			}
			shown := 0
			for _, path := range fields {
				set := func(v string) ([]byte, string) {
					root := clone(reflect.ValueOf(proto)).Interface()
					n := 0
					for _, l := range stringsOf(root) {
						if fieldOf(l.path) == path {
							// Keys of one map stay apart.
							if strings.HasSuffix(path, "(key)") {
								l.set(fmt.Sprintf("%s%d", v, n))
							} else {
								l.set(v)
							}
							n++
						}
					}
					page, err := c.render(root)
					if err != nil {
						t.Fatalf("%s = %q: %v", path, v, err)
					}
					return page, path
				}
				ref, path := set(benign)
				want := shape(t, ref)
				if bytes.Contains(ref, []byte(benign)) {
					shown++
				}
				for _, h := range hostile {
					page, _ := set(h)
					if got := shape(t, page); got != want {
						t.Errorf("%s = %q changes the page's markup:\n got %s\nwant %s", path, h, got, want)
					}
					for _, raw := range []string{"<script", "<img", "<svg onload"} {
						if bytes.Contains(page, []byte(raw)) {
							t.Errorf("%s = %q: the page contains %q", path, h, raw)
						}
					}
				}
			}
			// The test means something only if the values reach the page.
			if shown == 0 {
				t.Fatalf("none of %d fields is shown on the page", len(fields))
			}
			t.Logf("%d fields (%d strings) set, %d of them shown on the page", len(fields), len(all), shown)
		})
	}
}

// shape summarises a page's markup: the count of each element and of
// each attribute name, and any attribute that could run script.
func shape(t *testing.T, page []byte) string {
	t.Helper()
	counts := map[string]int{}
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken && tt != html.EndTagToken {
			continue
		}
		tok := z.Token()
		counts[tt.String()+" "+tok.Data]++
		for _, a := range tok.Attr {
			counts["@"+a.Key]++
			v := strings.ToLower(strings.TrimSpace(a.Val))
			if strings.HasPrefix(a.Key, "on") || strings.HasPrefix(v, "javascript:") && (a.Key == "href" || a.Key == "src" || a.Key == "xlink:href") {
				counts["DANGER "+a.Key+"="+a.Val]++
			}
		}
	}
	var keys []string
	for k := range counts {
		keys = append(keys, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

var index = regexp.MustCompile(`\[[^]]*\]`)

// fieldOf names the field of a string's path, without list indices or map
// keys.
func fieldOf(path string) string { return index.ReplaceAllString(path, "[]") }

// clone copies v deeply where it holds text (the rest, never changed
// here, is shared).
func clone(v reflect.Value) reflect.Value {
	if !holdsText(v.Type(), 0) {
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(clone(v.Elem()))
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				c.Field(i).Set(clone(v.Field(i)))
			}
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			c.Index(i).Set(clone(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(it.Key(), clone(it.Value()))
		}
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(clone(v.Elem()))
		return c
	}
	return v
}

// location is one string in a document.
type location struct {
	path string
	set  func(string)
}

// stringsOf lists the strings under root (a pointer), in a fixed order.
func stringsOf(root any) []location {
	var out []location
	walk(reflect.ValueOf(root).Elem(), "", func() {}, &out)
	return out
}

// walk lists the strings of v, which is addressable or, inside a map or
// an interface, a copy: commit writes the copy back to where it came from.
func walk(v reflect.Value, path string, commit func(), out *[]location) {
	if v.Kind() != reflect.Interface && !holdsText(v.Type(), 0) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		*out = append(*out, location{path, func(s string) { v.SetString(s); commit() }})
	case reflect.Pointer:
		if !v.IsNil() {
			walk(v.Elem(), path, commit, out)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		walk(c, path, func() { v.Set(c); commit() }, out)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name, commit, out)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), commit, out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			k := k
			p := fmt.Sprintf("%s[%v]", path, k)
			if k.Kind() == reflect.String {
				*out = append(*out, location{p + "(key)", func(s string) {
					val := v.MapIndex(k)
					v.SetMapIndex(k, reflect.Value{})
					v.SetMapIndex(reflect.ValueOf(s).Convert(k.Type()), val)
					commit()
				}})
			}
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(v.MapIndex(k))
			walk(c, p, func() { v.SetMapIndex(k, c); commit() }, out)
		}
	}
}

// trim shortens every list to keepItems elements: the page is made by
// field, and a short document renders fast enough to render once per field
// and value.
func trim(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			trim(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				trim(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Len() > keepItems && v.CanSet() {
			v.Set(v.Slice(0, keepItems))
		}
		for i := 0; i < v.Len(); i++ {
			trim(v.Index(i), depth+1)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			trim(it.Value(), depth+1)
		}
	}
}

const keepItems = 2

// fill sets every nil pointer and makes every empty list or map whose
// elements hold text have one element, so that each string field of the
// types exists in the document to be set.
func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() && v.CanSet() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			fill(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			// A Document has one kind: its other pointers stay nil.
			if !v.Type().Field(i).IsExported() || v.Type() == reflect.TypeOf(Document{}) && f.Kind() == reflect.Pointer && f.IsNil() {
				continue
			}
			fill(f, depth+1)
		}
	case reflect.Slice:
		if v.Len() == 0 && v.CanSet() && holdsText(v.Type().Elem(), 0) {
			v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
		}
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.Len() == 0 && v.CanSet() && v.Type().Key().Kind() == reflect.String && holdsText(v.Type().Elem(), 0) {
			m := reflect.MakeMap(v.Type())
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, depth+1)
			m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
			v.Set(m)
		}
	}
}

// holdsText says whether a value of type t can hold a string.
func holdsText(t reflect.Type, depth int) bool {
	if depth > 12 {
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsText(t.Elem(), depth+1)
	case reflect.Map:
		return t.Key().Kind() == reflect.String || holdsText(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && holdsText(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}
