package filter_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/policy"
)

// Every filter docs/filters.md, docs/configuration.md and the README show compiles, and every
// whole policies file there loads.
func TestTheDocumentedFiltersCompile(t *testing.T) {
	t.Parallel()
	oneLine := regexp.MustCompile(`filter: '(.*)'`)
	checked := 0
	for _, doc := range []string{"../docs/filters.md", "../docs/configuration.md", "../README.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(text), "```")
		for i := 1; i < len(blocks); i += 2 {
			block, ok := strings.CutPrefix(blocks[i], "yaml\n")
			if !ok || !strings.Contains(block, "filter:") {
				continue
			}
			if strings.HasPrefix(block, "routes:") {
				if _, err := policy.Parse(doc, []byte(block), func(string) (string, bool) { return "whsec_c2VjcmV0", true }); err != nil {
					t.Errorf("%s: %v", doc, err)
				}
				checked++
			}
			for _, m := range oneLine.FindAllStringSubmatch(block, -1) {
				if _, err := filter.Compile(strings.ReplaceAll(m[1], "''", "'")); err != nil {
					t.Errorf("%s: %s: %v", doc, m[1], err)
				}
				checked++
			}
			if _, folded, ok := strings.Cut(block, "filter: >-\n"); ok {
				if _, err := filter.Compile(folded); err != nil {
					t.Errorf("%s: %s: %v", doc, folded, err)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d documented filters found", checked)
	}
}
