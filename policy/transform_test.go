package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// transformConfig writes policies.yaml with one destination whose
// transform is block, and the given script files beside it, and loads it.
func transformConfig(t *testing.T, block string, files map[string]string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := "routes:\n  - name: stripe\n    path: /stripe\n    destinations:\n      - name: billing\n        url: 'http://a'\n        transform:" + block
	file := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return Parse(file, []byte(yaml), env(map[string]string{"API_KEY": "k_1"}))
}

const okScript = "addHandler('transform', (request, context) => request);\n"

func TestTransformConfig(t *testing.T) {
	t.Run("a file name alone is read beside policies.yaml", func(t *testing.T) {
		cfg, err := transformConfig(t, " transforms/billing.js\n", map[string]string{"transforms/billing.js": okScript})
		if err != nil {
			t.Fatal(err)
		}
		tr := cfg.Routes[0].Destinations[0].Transform
		if tr == nil || tr.File != "transforms/billing.js" || tr.Script != okScript || tr.Timeout != 50*time.Millisecond || tr.Memory != 64<<20 {
			t.Fatalf("got %+v", tr)
		}
	})
	t.Run("a block sets the limits and the environment", func(t *testing.T) {
		cfg, err := transformConfig(t, "\n          file: b.js\n          timeout: 200ms\n          memory: 128MiB\n          env: {API_KEY: '${API_KEY}', REGION: eu}\n", map[string]string{"b.js": okScript})
		if err != nil {
			t.Fatal(err)
		}
		tr := cfg.Routes[0].Destinations[0].Transform
		if tr.Timeout != 200*time.Millisecond || tr.Memory != 128<<20 || tr.Env["API_KEY"] != "k_1" || tr.Env["REGION"] != "eu" {
			t.Fatalf("got %+v", tr)
		}
	})
	t.Run("an inline script keeps its template literals", func(t *testing.T) {
		cfg, err := transformConfig(t, "\n          script: |\n            addHandler('transform', (request, context) => {\n              request.path = `/events/${request.body.type}`;\n              return request;\n            });\n", nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := cfg.Routes[0].Destinations[0].Transform
		if !strings.Contains(tr.Script, "`/events/${request.body.type}`") || tr.Line != 9 {
			t.Fatalf("got %+v", tr)
		}
	})
}

func TestTransformConfigErrors(t *testing.T) {
	cases := []struct {
		name, block string
		files       map[string]string
		want        string
	}{
		{"a syntax error in a file names the file, line and column", " t.js\n",
			map[string]string{"t.js": "addHandler('transform', (request) => {\n  return request\n  }}\n"},
			`policies.yaml:7: routes[0].destinations[0].transform: t.js:3:4: SyntaxError: Unexpected token }`},
		{"a syntax error in an inline script names its line in policies.yaml", "\n          script: |\n            addHandler('transform', (request) => {\n              return request +;\n            });\n", nil,
			`policies.yaml:10: routes[0].destinations[0].transform.script: script line 2 column 19: SyntaxError: Unexpected token ;`},
		{"a missing file", " nope.js\n", nil, `policies.yaml:7: routes[0].destinations[0].transform: open `},
		{"a script with no handler", "\n          file: t.js\n", map[string]string{"t.js": "const x = 1;\n"},
			`policies.yaml:8: routes[0].destinations[0].transform.file: t.js: the script registers no handler`},
		{"a script whose top level loops", " t.js\n", map[string]string{"t.js": "for (;;) {}\n"},
			`policies.yaml:7: routes[0].destinations[0].transform: t.js: transform_error: timeout`},
		{"file and script together", "\n          file: t.js\n          script: x\n", nil,
			`policies.yaml:9: routes[0].destinations[0].transform.script: give file or script, not both`},
		{"a file that is not JavaScript", " t.py\n", nil, `policies.yaml:7: routes[0].destinations[0].transform: "t.py" is not a .js file`},
		{"an unknown key", "\n          file: t.js\n          timout: 1s\n", map[string]string{"t.js": okScript},
			`policies.yaml:9: routes[0].destinations[0].transform.timout: unknown key "timout"`},
		{"a memory limit too small", "\n          file: t.js\n          memory: 1KiB\n", map[string]string{"t.js": okScript},
			`policies.yaml:9: routes[0].destinations[0].transform.memory: memory must be a size of at least 1MiB`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := transformConfig(t, c.block, c.files)
			if err == nil {
				t.Fatal("no error")
			}
			got := err.Error()
			if i := strings.Index(got, "policies.yaml"); i >= 0 {
				got = got[i:]
			}
			if !strings.HasPrefix(got, c.want) {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
