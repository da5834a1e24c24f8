package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCIRunsTheTestsThatSkipUnderRace checks that .ci/run, which runs the
// suite with -race, also runs every test here that skips under -race, in a
// `go test` of this package without it: else CI never runs them.
func TestCIRunsTheTestsThatSkipUnderRace(t *testing.T) {
	t.Parallel()
	skipping := testsCalling(t, "SkipJetStreamRestartUnderRace")
	if len(skipping) == 0 {
		t.Fatal("no test calls SkipJetStreamRestartUnderRace; this check finds nothing")
	}
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	runArg := regexp.MustCompile(`-run '([^']+)'`)
	var runs []*regexp.Regexp
	for line := range strings.Lines(string(ci)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "go test ") || strings.Contains(line, "-race") || !strings.HasSuffix(line, " ./store") {
			continue
		}
		if m := runArg.FindStringSubmatch(line); m != nil {
			runs = append(runs, regexp.MustCompile(m[1]))
		}
	}
	for _, name := range skipping {
		ran := false
		for _, re := range runs {
			ran = ran || re.MatchString(name)
		}
		if !ran {
			t.Errorf("%s skips under -race and no `go test -run '…' ./store` without -race in .ci/run runs it", name)
		}
	}
}

// testsCalling returns the Test functions of this directory whose body
// calls a function named fn.
func testsCalling(t *testing.T, fn string) []string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fd.Name.Name, "Test") || fd.Body == nil {
				continue
			}
			calls := false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == fn {
					calls = true
				}
				return !calls
			})
			if calls {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names
}
