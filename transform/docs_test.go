package transform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every script docs/transformations.md shows as a ```js block is one of
// the examples the tests run, byte for byte, and every example is shown.
func TestTheDocumentedScriptsAreTheTestedExamples(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../docs/transformations.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/examples/*.js")
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		examples[string(b)] = f
	}
	shown := map[string]bool{}
	blocks := strings.Split(string(text), "```")
	for i := 1; i < len(blocks); i += 2 {
		src, ok := strings.CutPrefix(blocks[i], "js\n")
		if !ok {
			continue
		}
		f, ok := examples[src]
		if !ok {
			t.Errorf("docs/transformations.md shows a script that is no tested example:\n%s", src)
			continue
		}
		shown[f] = true
	}
	for _, f := range files {
		if !shown[f] {
			t.Errorf("%s is not shown in docs/transformations.md", f)
		}
	}
}
