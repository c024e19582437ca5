package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// checkSchema fails the test unless out, what a command printed (one
// JSON document, a list of them, or one per line with lines), follows
// the schema file its "schema" key names; it returns the ids it checked.
func checkSchema(t *testing.T, what, out string, lines bool) []string {
	t.Helper()
	docs := []string{out}
	if lines {
		docs = nil
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.TrimSpace(l) != "" {
				docs = append(docs, l)
			}
		}
	}
	if len(docs) == 0 {
		t.Errorf("%s: no document to check", what)
	}
	var all []string
	for _, d := range docs {
		ids, err := schemas.Check([]byte(d))
		if err != nil {
			t.Errorf("%s: %v\n%s", what, err, d)
		}
		all = append(all, ids...)
	}
	return all
}

// tableIDs are the schema ids of docs/schemas.md's table of documents.
func tableIDs(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "schemas.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(string(doc), "\n## ")
	var ids []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(ovpnperf/[a-z0-9-]+/v[0-9]+)` \\|").FindAllStringSubmatch(table, -1) {
		ids = append(ids, m[1])
	}
	sort.Strings(ids)
	return ids
}

// Every kind of document in docs/schemas.md's table has a schema file in
// docs/schemas, every file a row, and every file compiles.
func TestSchemaFilesMatchTable(t *testing.T) {
	t.Parallel()
	rows, files := tableIDs(t), schemas.IDs()
	if len(rows) < 15 {
		t.Fatalf("docs/schemas.md's table lists %d kinds: %v", len(rows), rows)
	}
	inRows := map[string]bool{}
	for _, id := range rows {
		inRows[id] = true
		if !strings.Contains(strings.Join(files, " ")+" ", id+" ") {
			t.Errorf("%s is in docs/schemas.md's table but has no file docs/schemas/%s", id, schemas.File(id))
		}
	}
	for _, id := range files {
		if !inRows[id] {
			t.Errorf("docs/schemas/%s has no row in docs/schemas.md's table", schemas.File(id))
		}
	}
	entries, err := os.ReadDir(filepath.Join(moduleRoot(t), "docs", "schemas"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := schemas.ID(e.Name()); !ok && strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("docs/schemas/%s: not named NAME.vN.json", e.Name())
		}
	}
	all, err := schemas.Schemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(files) {
		t.Errorf("compiled %d schemas of %d files", len(all), len(files))
	}
	t.Logf("%d kinds of document in docs/schemas.md, %d schema files", len(rows), len(files))
}

// Each schema's own conventions: draft 2020-12, a title that is its id,
// the id as the "schema" key's only value, every object closed to
// undocumented fields, and every numeric field described.
func TestSchemaFilesConventions(t *testing.T) {
	t.Parallel()
	for _, id := range schemas.IDs() {
		b, err := schemas.Text(id)
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", schemas.File(id), err)
		}
		if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["title"] != id {
			t.Errorf("%s: $schema %v, title %v: want draft 2020-12 and %s", schemas.File(id), s["$schema"], s["title"], id)
		}
		if !strings.Contains(string(b), `"const": "`+id+`"`) {
			t.Errorf("%s: the schema key is not the constant %s", schemas.File(id), id)
		}
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if v["type"] == "object" || hasType(v, "object") {
					_, props := v["properties"]
					ap, hasAP := v["additionalProperties"]
					if props && (!hasAP || ap != false) && v["unevaluatedProperties"] != false {
						t.Errorf("%s %s: an object with properties must set additionalProperties false", schemas.File(id), path)
					}
					if !props && !hasAP {
						t.Errorf("%s %s: an object says neither its properties nor what its values are", schemas.File(id), path)
					}
				}
				if (hasType(v, "number") || hasType(v, "integer")) && strings.Contains(path, "/properties/") &&
					!strings.HasSuffix(path, "/items") && !strings.HasSuffix(path, "/additionalProperties") {
					if d, _ := v["description"].(string); !unitWords.MatchString(d) {
						t.Errorf("%s %s: a number whose description does not say its unit: %q", schemas.File(id), path, d)
					}
				}
				for k, c := range v {
					walk(path+"/"+k, c)
				}
			case []any:
				for _, c := range v {
					walk(path+"/[]", c)
				}
			}
		}
		walk("#", s)
	}
}

// unitWords are what a number's description says its unit with.
var unitWords = regexp.MustCompile(`(?i)bit|byte|second|percent|%|packet|count|number|\bids?\b|ticks|fraction|ratio|version|revision|status|index|\bper\b|cores|CPU|segments|datagrams|retransmits|streams|how many|how often|\bunit\b`)

func hasType(v map[string]any, want string) bool {
	switch ty := v["type"].(type) {
	case string:
		return ty == want
	case []any:
		for _, x := range ty {
			if x == want {
				return true
			}
		}
	}
	return false
}

// The check can fail: a field the schema does not document, at the top
// or deep in a document, a refusal kind that does not exist, a wrong
// schema id and a missing one are each refused.
func TestSchemaRejectsUndocumented(t *testing.T) {
	t.Parallel()
	run, err := os.ReadFile(recorded("labrun-wan-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.Check(run); err != nil {
		t.Fatalf("the recorded run does not follow its schema: %v", err)
	}
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		if err := json.Unmarshal(run, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	row0 := func(doc map[string]any) map[string]any { return doc["rows"].([]any)[0].(map[string]any) }
	for name, b := range map[string][]byte{
		"a field at the top": edit(func(d map[string]any) { d["undocumented"] = 1 }),
		"a field in a row":   edit(func(d map[string]any) { row0(d)["undocumented_bps"] = 1.0 }),
		"a field in the host": edit(func(d map[string]any) {
			d["host"].(map[string]any)["undocumented"] = "x"
		}),
		"an unknown refusal kind": edit(func(d map[string]any) {
			row0(d)["refusal"] = map[string]any{"kind": "made-up"}
		}),
		"an unknown refusal figure": edit(func(d map[string]any) {
			row0(d)["refusal"] = map[string]any{"kind": measure.RefusalKinds()[0], "figures": map[string]any{"made_up_seconds": 1}}
		}),
		"a string for a rate": edit(func(d map[string]any) { row0(d)["median_bps"] = "fast" }),
		"another version":     edit(func(d map[string]any) { d["schema"] = "ovpnperf/run/v9" }),
		"no schema key":       edit(func(d map[string]any) { delete(d, "schema") }),
	} {
		_, err := schemas.Check(b)
		if err == nil {
			t.Errorf("%s: the schema accepted it", name)
		}
		if strings.Contains(name, "schema") || strings.Contains(name, "version") {
			if !errors.Is(err, schemas.ErrNoSchema) {
				t.Errorf("%s: %v, want ErrNoSchema", name, err)
			}
		}
	}
	// The same for a document of each other kind a cheap command writes.
	v := ovpnperf(t, "version", "--json").mustSucceed(t).stdout
	var doc map[string]any
	if err := json.Unmarshal([]byte(v), &doc); err != nil {
		t.Fatal(err)
	}
	doc["undocumented"] = true
	b, _ := json.Marshal(doc)
	if _, err := schemas.Check(b); err == nil {
		t.Errorf("version: the schema accepted an undocumented field")
	}
}

// Every command that runs cheaply here writes what its schema file says;
// the commands that need a lab are checked in their own tests (lab up and
// status, pmtu, probe, pps, tune, cluster, lab calibrate) and in
// TestEveryExample, and the recorded documents below.
func TestCommandsFollowSchemas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join("..", "..", "internal", "lint", "testdata", "debian", "client.conf")
	pcap := filepath.Join("..", "..", "internal", "recipe", "testdata", "fragment", "frag1400-1400.pcap")
	probeDoc := filepath.Join(dir, "path.json")
	if err := os.WriteFile(probeDoc, []byte(`{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","path":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range []struct {
		args []string
		exit int
	}{
		{args: []string{"version", "--json"}},
		{args: []string{"lint", conf, "--rtt", "200ms", "--rate", "50mbit", "--pmtu", "1492", "--json"}},
		{args: []string{"advise", "--rate", "20mbit", "--rtt", "200ms", "--pmtu", "1500", "--json"}},
		{args: []string{"advise", "--rate", "100mbit", "--rtt", "10ms", "--pmtu", "1400", "--blackhole", "--dco", "yes", "--client-os", "windows", "--json"}},
		{args: []string{"recipe", "list", "--json"}},
		{args: []string{"recipe", "judge", recorded("recipe-all.json"), "--json"}},
		{args: []string{"compare", recorded("labrun-wan-1.json"), recorded("labrun-wan-2.json"), "--json"}},
		{args: []string{"compare", recorded("labrun-lan-jumbo.json"), recorded("labrun-lan-jumbo.json"), "--old-variant", "default", "--new-variant", "jumbo", "--json"}},
		{args: []string{"analyze", pcap, "--json"}},
		{args: []string{"crypto", "--json", "--seconds", "0.05", "--sizes", "1024", "--ciphers", "AES-256-GCM"}},
	} {
		r := ovpnperf(t, c.args...)
		if r.code != c.exit {
			t.Errorf("ovpnperf %s: exit %d, want %d\n%s", strings.Join(c.args, " "), r.code, c.exit, r.stderr)
			continue
		}
		for _, id := range checkSchema(t, "ovpnperf "+strings.Join(c.args, " "), r.stdout, false) {
			got[id]++
		}
	}
	t.Logf("checked: %v", got)
	for _, id := range []string{"ovpnperf/version/v1", "ovpnperf/lint/v1", "ovpnperf/advise/v1", "ovpnperf/recipe-list/v1", measure.Schema, "ovpnperf/compare/v1", "ovpnperf/capture/v1", "ovpnperf/crypto/v1"} {
		if got[id] == 0 {
			t.Errorf("no %s document was checked", id)
		}
	}
}

// Every recorded document in the repository's testdata whose schema has a
// file follows it: the runs and recipes that need a lab to make.
func TestRecordedDocumentsFollowSchemas(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	known := map[string]bool{}
	for _, id := range schemas.IDs() {
		known[id] = true
	}
	got := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "fuzz") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".json") || !strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var head struct {
			Schema string `json:"schema"`
		}
		var list []struct {
			Schema string `json:"schema"`
		}
		if json.Unmarshal(b, &head) != nil && (json.Unmarshal(b, &list) != nil || len(list) == 0) {
			return nil
		}
		if len(list) > 0 {
			head = list[0]
		}
		if !known[head.Schema] {
			return nil // an older version or another format
		}
		rel, _ := filepath.Rel(root, path)
		for _, id := range checkSchema(t, rel, string(b), false) {
			got[id]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded documents checked: %v", got)
	for _, id := range []string{measure.Schema} {
		if got[id] == 0 {
			t.Errorf("no recorded %s document was found to check", id)
		}
	}
}

// schema check: the schema of each document that follows it and exit 0;
// exit 1 naming the field for one that does not; one line and exit 2 for
// a schema ovpnperf has no file for and for what is not JSON.
func TestSchemaCheckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, list := recorded("labrun-wan-1.json"), recorded("recipe-all.json")
	r := ovpnperf(t, "schema", "check", good, list).mustSucceed(t)
	if !strings.Contains(r.stdout, good+": follows "+measure.Schema+"\n") || !strings.Contains(r.stdout, list+": follows 10 documents of "+measure.Schema+"\n") {
		t.Errorf("schema check printed:\n%s", r.stdout)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["rows"].([]any)[0].(map[string]any)["undocumented_bps"] = 1
	bad := filepath.Join(dir, "bad.json")
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = ovpnperf(t, "schema", "check", good, bad)
	if r.code != 1 || !strings.Contains(r.stderr, bad+": does not follow "+measure.Schema) || !strings.Contains(r.stderr, "undocumented_bps") {
		t.Errorf("a document with an undocumented field: exit %d\n%s", r.code, r.stderr)
	}
	ovpnperf(t, "schema", "check", recorded("tune-lossy.json")).mustBeUsageError(t, `no schema for "ovpnperf.tune/2"`)
	notJSON := filepath.Join(dir, "x.json")
	if err := os.WriteFile(notJSON, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	ovpnperf(t, "schema", "check", notJSON).mustBeUsageError(t, "not one JSON value")
	// show prints the file that check uses.
	r = ovpnperf(t, "schema", "show", measure.Schema).mustSucceed(t)
	want, err := schemas.Text(measure.Schema)
	if err != nil || r.stdout != string(want) {
		t.Errorf("schema show %s: %v, printed %d bytes of %d", measure.Schema, err, len(r.stdout), len(want))
	}
}
