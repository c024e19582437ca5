// Package schemas holds the JSON Schema (draft 2020-12) of every document
// ovpnperf writes, one file NAME.vN.json per schema id ovpnperf/NAME/vN
// (docs/schemas.md lists them), and checks a document against the schema
// its "schema" key names. The files are built into the binary, so that
// `ovpnperf schema check` needs nothing beside it.
package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed *.json
var files embed.FS

// base is the URL the files are known by while compiling: their $ref
// values are local ("#/$defs/…"), so it is never fetched.
const base = "https://ovpnperf.invalid/schemas/"

var fileName = regexp.MustCompile(`^([a-z][a-z0-9-]*)\.(v[0-9]+)\.json$`)

// ID is the schema id of a file name: "run.v2.json" → "ovpnperf/run/v2".
func ID(file string) (string, bool) {
	m := fileName.FindStringSubmatch(file)
	if m == nil {
		return "", false
	}
	return "ovpnperf/" + m[1] + "/" + m[2], true
}

// File is the file name of a schema id: "ovpnperf/run/v2" → "run.v2.json".
func File(id string) string {
	name, version, _ := strings.Cut(strings.TrimPrefix(id, "ovpnperf/"), "/")
	return name + "." + version + ".json"
}

// IDs are the schema ids with a file, sorted.
func IDs() []string {
	var ids []string
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		if id, ok := ID(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Text is the schema file of id, as it is in the repository.
func Text(id string) ([]byte, error) {
	return files.ReadFile(File(id))
}

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

// Schemas are every file compiled, by schema id.
func Schemas() (map[string]*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		compiled = map[string]*jsonschema.Schema{}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		for _, id := range IDs() {
			b, err := Text(id)
			if err != nil {
				compileErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = fmt.Errorf("%s: %w", File(id), err)
				return
			}
			if err := c.AddResource(base+File(id), doc); err != nil {
				compileErr = fmt.Errorf("%s: %w", File(id), err)
				return
			}
		}
		for _, id := range IDs() {
			s, err := c.Compile(base + File(id))
			if err != nil {
				compileErr = fmt.Errorf("%s: %w", File(id), err)
				return
			}
			compiled[id] = s
		}
	})
	return compiled, compileErr
}

// ErrNoSchema is a document without a "schema" key ovpnperf has a file for.
var ErrNoSchema = errors.New("no schema")

// ErrNotJSON is input that is not one JSON value.
var ErrNotJSON = errors.New("not one JSON value")

// Check validates one JSON document, or a list of documents (`recipe all
// --json`, `lab status --json`), against the schema each one's "schema"
// key names, and returns the ids in document order. A document whose
// schema is not one of IDs fails with ErrNoSchema.
func Check(b []byte) ([]string, error) {
	all, err := Schemas()
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	docs := []any{v}
	list, isList := v.([]any)
	if isList {
		docs = list
	}
	var ids []string
	for i, d := range docs {
		where := ""
		if isList {
			where = fmt.Sprintf("element %d: ", i)
		}
		obj, _ := d.(map[string]any)
		id, _ := obj["schema"].(string)
		s, ok := all[id]
		if !ok {
			if id == "" {
				return ids, fmt.Errorf("%s%w: the document has no \"schema\" key", where, ErrNoSchema)
			}
			return ids, fmt.Errorf("%s%w for %q (`ovpnperf schema list` names those there are)", where, ErrNoSchema, id)
		}
		if err := s.Validate(d); err != nil {
			// The first line names the schema by the URL it was compiled
			// as; the lines below say what failed, where.
			msg := err.Error()
			if _, rest, ok := strings.Cut(msg, "\n"); ok {
				msg = rest
			}
			return ids, fmt.Errorf("%sdoes not follow %s (%s):\n%s", where, id, path.Join("docs/schemas", File(id)), msg)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
