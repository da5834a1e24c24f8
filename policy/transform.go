package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jethook/jethook/internal/size"
	"github.com/jethook/jethook/transform"
)

// Transform is a destination's `transform:`, a JavaScript script run on
// each delivery to reshape its request (package transform,
// docs/transformations.md). The forwarder compiles Script again; it is
// kept as text so that a reload compares it.
type Transform struct {
	// File is the script's path as written, relative to policies.yaml;
	// empty for an inline script.
	File string
	// Script is the script's text, read from File or written inline.
	Script string
	// Name names the script in errors and stack traces: File, or the key
	// path of an inline script ("routes[0].destinations[1].transform.script").
	Name string
	// Line is the line of policies.yaml an inline script's first line is
	// on, 0 for a file.
	Line    int
	Timeout time.Duration     // per run, default 50ms
	Memory  int64             // bytes allocated per run, default 64 MiB
	Env     map[string]string // what the script reads as process.env
}

// Limits are the run limits of t on a route whose bodies are at most
// maxBody bytes.
func (t *Transform) Limits(maxBody int64) transform.Limits {
	return transform.Limits{Timeout: t.Timeout, Memory: t.Memory, MaxBody: maxBody}
}

// transform decodes a destination's `transform:`: a file name, or a
// mapping with file or script, and timeout, memory and env. The script is
// compiled here, its top-level code run once, so that a mistake is a
// config error: a syntax error in a file names file:line:column, one in an
// inline script the line of policies.yaml it is on.
func (d *decoder) transform(e entry, maxBody int64) *Transform {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return nil
	}
	t := &Transform{Timeout: transform.DefaultTimeout, Memory: transform.DefaultMemory}
	fileEntry, scriptEntry := e, entry{}
	if n.Kind == yaml.MappingNode {
		m, ok := d.mapping(n, e.path, "file", "script", "timeout", "memory", "env")
		if !ok {
			return nil
		}
		f, hasFile := m["file"]
		s, hasScript := m["script"]
		switch {
		case hasFile && hasScript:
			d.failf(s.key, s.path, "give file or script, not both")
			return nil
		case !hasFile && !hasScript:
			d.failf(n, join(e.path, "file"), "missing; give the script's file, or the script itself under script")
			return nil
		}
		fileEntry, scriptEntry = f, s
		if !hasFile {
			fileEntry = entry{}
		}
		if v, ok := m["timeout"]; ok {
			if dur, ok := d.positive(v); ok {
				t.Timeout = dur
			}
		}
		if v, ok := m["memory"]; ok {
			if s, ok := d.str(v); ok {
				if n, err := size.Parse(s); err != nil || n < 1<<20 {
					d.failf(v.node(), v.path, "memory must be a size of at least 1MiB (64MiB, 256MiB)")
				} else {
					t.Memory = n
				}
			}
		}
		if v, ok := m["env"]; ok {
			t.Env = d.env(v)
		}
	}
	if fileEntry.val != nil {
		if !d.transformFile(fileEntry, t) {
			return nil
		}
	} else if !d.transformScript(scriptEntry, t) {
		return nil
	}
	_, err := transform.Compile(t.Name, t.Script, t.Env, t.Limits(maxBody))
	if err == nil {
		return t
	}
	at, key := fileEntry, fileEntry.path
	if fileEntry.val == nil {
		at, key = scriptEntry, scriptEntry.path
	}
	var se *transform.SyntaxError
	if errors.As(err, &se) && t.Line > 0 {
		// The script's own line is a line of policies.yaml.
		d.failf(&yaml.Node{Line: t.Line + se.Line - 1}, key, "script line %d column %d: SyntaxError: %s", se.Line, se.Column, se.Msg)
		return nil
	}
	d.failf(at.node(), key, "%v", err)
	return nil
}

// transformFile reads the script e names into t.
func (d *decoder) transformFile(e entry, t *Transform) bool {
	name, ok := d.str(e)
	if !ok {
		return false
	}
	if !strings.HasSuffix(name, ".js") {
		d.failf(e.node(), e.path, "%q is not a .js file; write an inline script under transform.script", name)
		return false
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(d.file), path)
	}
	info, err := os.Stat(path)
	if err == nil && info.Size() > transform.MaxScript {
		d.failf(e.node(), e.path, "%s is %d bytes; a script may have at most %d", name, info.Size(), transform.MaxScript)
		return false
	}
	src, err := os.ReadFile(path)
	if err != nil {
		d.failf(e.node(), e.path, "%v", err)
		return false
	}
	t.File, t.Script, t.Name = name, string(src), name
	return true
}

// transformScript takes the inline script of e into t. ${VAR} is not
// expanded in it: JavaScript has template literals of its own.
func (d *decoder) transformScript(e entry, t *Transform) bool {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return false
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.failf(e.node(), e.path, "expected the script's text")
		return false
	}
	t.Script = n.Value
	t.Line = n.Line
	if n.Style == yaml.LiteralStyle || n.Style == yaml.FoldedStyle {
		t.Line++ // a block's text starts on the line after its | or >
	}
	t.Name = e.path
	return true
}

// env decodes `env:`, names to values, ${VAR} expanded in the values.
func (d *decoder) env(e entry) map[string]string {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return nil
	}
	m, ok := d.mapping(n, e.path, keysOf(n)...)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := d.str(v); ok {
			out[k] = s
		}
	}
	return out
}

// keysOf lists the scalar keys of mapping n.
func keysOf(n *yaml.Node) []string {
	var keys []string
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && !slices.Contains(keys, k.Value) {
			keys = append(keys, k.Value)
		}
	}
	return keys
}
