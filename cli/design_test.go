package cli

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages at the bottom of jethook import only what docs/design.md
// says they do ("Dependencies point one way"), so that the store, the
// configuration and the senders' library can be read, and tested, alone.
func TestTheLowerPackagesImportOnlyWhatTheDesignSays(t *testing.T) {
	t.Parallel()
	const module = "github.com/jethook/jethook/"
	may := map[string][]string{
		"store":         {"internal/size"},
		"alert":         {"internal/size"},
		"policy":        {"provider", "filter", "transform", "internal/size"},
		"transform":     {"payload", "provider"},
		"filter":        {"payload"},
		"provider":      {"payload"},
		"metrics":       nil,
		"egress":        nil,
		"payload":       nil,
		"internal/size": nil,
	}
	design, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for pkg, allowed := range may {
		if !strings.Contains(string(design), "`"+pkg+"`") {
			t.Errorf("docs/design.md does not name %s", pkg)
		}
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				dep, ours := strings.CutPrefix(path, module)
				if ours && !slices.Contains(allowed, dep) {
					t.Errorf("%s imports %s; docs/design.md allows it only %v", f, dep, allowed)
				}
			}
		}
	}
}
