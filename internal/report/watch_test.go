package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// A history recorded by `ovpnperf watch --history` (a lab tunnel) is one
// document of its rounds; the page has a band per direction of each
// measured round, named by its limit, and a table row per round.
func TestWatchHistory(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "watch-history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse("watch.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Schema != watchdoc.Schema || len(docs[0].Watch) == 0 || docs[0].WatchCut {
		t.Fatalf("docs: %+v", docs)
	}
	rounds := docs[0].Watch
	measured := 0
	for i := range rounds {
		if rounds[i].Run != nil {
			measured++
		}
	}
	if measured == 0 {
		t.Fatal("no measured round in the recorded history")
	}
	var page bytes.Buffer
	if err := Write(&page, docs, Options{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, `class="band `); n != 2*measured {
		t.Errorf("%d bands, want 2 per measured round (%d)", n, measured)
	}
	for i := range rounds {
		for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
			want := string(bindingLimit(&rounds[i], dir))
			if rounds[i].Run == nil {
				continue
			}
			if want == "" {
				want = "not judged"
			}
			if !strings.Contains(html, `data-direction="`+dir+`" data-limit="`+want+`"`) {
				t.Errorf("round %d %s: no band of limit %q", rounds[i].Seq, dir, want)
			}
		}
	}
	if n := strings.Count(html, "<tr data-result="); n != len(rounds) {
		t.Errorf("%d table rows, want %d", n, len(rounds))
	}
	// A last line cut short is left out and said; a damaged line before
	// it is an error.
	cut := data[:len(data)-10]
	docs, err = Parse("cut.jsonl", cut)
	if err != nil || !docs[0].WatchCut || len(docs[0].Watch) != len(rounds)-1 {
		t.Errorf("cut history: %v, %+v", err, docs)
	}
	if _, err := Parse("bad.jsonl", append(append([]byte(nil), data...), []byte("{\"schema\":1}\n{}\n")...)); err == nil {
		t.Error("a damaged line was read")
	}
}
