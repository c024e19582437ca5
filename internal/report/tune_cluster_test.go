package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cluster/clusterdoc"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
)

// strict decodes a testdata file into v refusing unknown keys, and checks
// that marshalling v gives back the same JSON: the recorded documents are
// what tune's and cluster's own types write, not a look-alike.
func strict(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var want, got any
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(data, &want)
	_ = json.Unmarshal(again, &got)
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Errorf("%s does not round-trip through its type:\nfile %s\ntype %s", file, w, g)
	}
}

func TestTuneAndClusterDocuments(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"tune-blackhole.json", "tune-lossy.json"} {
		var r tunedoc.Result
		strict(t, f, &r)
		// Recorded under version 2's first name, which readers still accept.
		if r.Schema != tunedoc.SchemaV2Legacy || len(r.Steps) == 0 {
			t.Errorf("%s: schema %q, %d steps", f, r.Schema, len(r.Steps))
		}
	}
	var st clusterdoc.Status
	strict(t, "cluster-status.json", &st)

	docs := load(t, "tune-blackhole.json")
	docs = append(docs, load(t, "tune-lossy.json")...)
	docs = append(docs, load(t, "cluster-status.json")...)
	// The recorded status predates its schema key: recognised by its keys.
	if docs[2].Schema != clusterdoc.LegacyStatusSchema || docs[2].Cluster == nil || docs[0].Tune == nil || docs[0].Tune.Schema != tunedoc.Schema {
		t.Fatalf("dispatch: %q %v %v", docs[2].Schema, docs[2].Cluster != nil, docs[0].Tune != nil)
	}
	// Today's `cluster status --json` names its schema.
	st.Schema, st.Argv = clusterdoc.StatusSchema, []string{"ovpnperf", "cluster", "status", "--json"}
	current, _ := json.Marshal(st)
	if cur, err := Parse("current.json", current); err != nil || cur[0].Schema != ClusterSchema || cur[0].Cluster == nil {
		t.Fatalf("current cluster status: %v %+v", err, cur)
	}
	var buf bytes.Buffer
	if err := Write(&buf, docs, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"Search path, up", "Throughput down (Mbit/s)", "advise's gap ×", `data-role="best, advise"`, `data-role="default"`,
		"Clients per instance", "Bytes (kB)", "Restarts (count)", "last: signal: killed", "Connected clients (count)", "3 documents"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Every candidate of every round, in both directions, is a bar.
	for _, d := range docs[:2] {
		for _, s := range d.Tune.Steps {
			for _, c := range s.Candidates {
				for _, dir := range d.Tune.Directions {
					_, role := tuneClass(d.Tune, c.Name)
					attrs := fmt.Sprintf(`<g class="bar" data-direction="%s" data-role="%s" data-round="%d" data-variant="%s">`, dir, role, s.Round, c.Name)
					if !strings.Contains(page, attrs) {
						t.Errorf("%s: no bar for round %d %s %s", d.File, s.Round, c.Name, dir)
					}
				}
			}
		}
	}
}

// TestClusterMarshalled: a status as serve's control socket encodes it
// (clusterdoc.Status through encoding/json) is read back by report.
func TestClusterMarshalled(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(clusterdoc.Status{ID: "ab12", OnePort: 1194, Backend: "iptables-nth",
		Instances: []clusterdoc.Instance{{Name: "u0", State: clusterdoc.StateUp, Proto: "udp", Port: 1195, Clients: 3, BytesIn: 5e6, BytesOut: 7e6, Restarts: 6, CrashLoop: true, LastExit: "exit status 1"}}})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse("s.json", b)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, docs, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Bytes (MB)", "1194 (iptables-nth)", "up (crash loop)", "last: exit status 1", `data-direction="bytes_out"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A tune document of schema 1 (rounds pooled) is read and judged again
// by the round-by-round rules.
func TestTuneV1Judged(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "tune", "testdata", "tune-blackhole.json"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Reader{RejudgeTune: tune.Rejudge}.Parse("v1.json", b)
	if err != nil {
		t.Fatal(err)
	}
	r := docs[0].Tune
	if r == nil || r.Schema != tunedoc.Schema || !r.Verdict.Found || r.Verdict.Best != "advise" || !r.Verdict.Records["up"].Won() {
		t.Fatalf("v1 document: %+v", r)
	}
}
