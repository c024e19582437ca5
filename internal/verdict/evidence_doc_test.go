package verdict

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/evidence.md is the one explanation of these rules. Its chance
// figures are recomputed here from the rules themselves, by enumerating
// every order of the samples, and every place that states a "1 in N"
// figure about them (README, the docs of recipes, advise/tune and compare,
// this package, tune's judge) must state one of
// the doc's figures and point to it.
func TestEvidenceDocMatchesTheRules(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	doc := read("docs/evidence.md")

	// Rule 2: with MinSamples a side and no real difference, every split
	// of the 2·MinSamples ranks is equally likely; count those in which
	// Above holds (all of a above all of b).
	n := MinSamples
	total, above := 0, 0
	for mask := 0; mask < 1<<(2*n); mask++ {
		var a, b []float64
		for i := 0; i < 2*n; i++ {
			if mask&(1<<i) != 0 {
				a = append(a, float64(i))
			} else {
				b = append(b, float64(i))
			}
		}
		if len(a) != n {
			continue
		}
		total++
		if Above(Of(a), Of(b)) {
			above++
		}
	}
	oneWay := total / above          // 20
	eitherWay := total / (2 * above) // 10
	rounds := oneWay * oneWay        // tune's MinRounds = 2 rounds: 400
	// Rule 3: all MinSamples pair ratios on one side of 1.
	pairs := 1 << n // 8
	for _, want := range []string{
		fmt.Sprintf("**1 in %d** for \"A faster than B\"", oneWay),
		fmt.Sprintf("**1 in\n%d** for \"one of them faster than the other\"", eitherWay),
		fmt.Sprintf("**1 in\n%d**", rounds),
		fmt.Sprintf("in 1 of %d cases per side", pairs),
		fmt.Sprintf("fewer than %d valid samples on each side", MinSamples),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/evidence.md does not state %q, which the rules give", want)
		}
	}
	allowed := map[string]bool{
		fmt.Sprint(oneWay): true, fmt.Sprint(eitherWay): true, fmt.Sprint(rounds): true, fmt.Sprint(pairs): true,
	}
	figure := regexp.MustCompile(`1 (?:in|of|round of) (\d+)`)
	for _, p := range []string{"README.md", "docs/lab.md", "docs/advise.md", "docs/report.md", "internal/verdict/verdict.go", "internal/tune/judge.go"} {
		text := read(p)
		// Pages in docs/ link to it relatively.
		link := "docs/evidence.md"
		if strings.HasPrefix(p, "docs/") {
			link = "(evidence.md)"
		}
		if !strings.Contains(text, link) {
			t.Errorf("%s does not point to docs/evidence.md", p)
		}
		for _, m := range figure.FindAllStringSubmatch(text, -1) {
			if !allowed[m[1]] {
				t.Errorf("%s states %q, a chance docs/evidence.md does not give", p, m[0])
			}
		}
	}
}
