package provider_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jethook/jethook/provider"
)

// TestEveryPresetHasANameConstant reads names.go: each preset has a
// constant there, and each constant there names a preset.
func TestEveryPresetHasANameConstant(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || !strings.HasPrefix(name.Name, "Name") {
				t.Errorf("%s is not a Name constant with a string value", name.Name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			consts = append(consts, v)
		}
		return false
	})
	slices.Sort(consts)
	if want := provider.Names(); !slices.Equal(consts, want) {
		t.Fatalf("names.go holds %v,\nthe presets are %v", consts, want)
	}
}
