package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits that keep a hostile or broken file from costing much.
const (
	maxErrors  = 50   // errors reported per file
	maxAliases = 1000 // alias dereferences per file (YAML "billion laughs")
)

// decoder walks a parsed YAML tree against the policies.yaml schema,
// collecting errors with the line and key path of each.
type decoder struct {
	file    string
	lookup  func(string) (string, bool)
	errs    []*Error
	warns   []string // Config.Warnings' first lines
	seen    map[Error]bool
	aliases int
}

// entry is one key/value pair of a mapping, with its key path.
type entry struct {
	key, val *yaml.Node
	path     string
}

// failf records an error at node n (or line 1) under key path key.
func (d *decoder) failf(n *yaml.Node, key, format string, args ...any) {
	e := Error{File: d.file, Line: 1, Key: key, Msg: fmt.Sprintf(format, args...)}
	if n != nil && n.Line > 0 {
		e.Line = n.Line
	}
	if d.seen[e] || len(d.errs) >= maxErrors {
		return
	}
	d.seen[e] = true
	d.errs = append(d.errs, &e)
}

// err returns the collected errors in line order: nil, one *Error, or
// several joined.
func (d *decoder) err() error {
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	switch len(d.errs) {
	case 0:
		return nil
	case 1:
		return d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// yamlLine matches the position yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the syntax errors yaml.v3's parser (rather than
// its scanner) reports. For these it prints the line of the enclosing
// block or of the token 0-based, one less than the 1-based line it prints
// for the scanner's errors (go.yaml.in/yaml/v3 v3.0.6, parser.fail).
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
}

// document parses data into the root node of its single YAML document; nil
// means the file is empty.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.syntax(err, data)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntax(err, data)
		return nil
	default:
		d.failf(&next, "document", "only one YAML document is allowed")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// syntax records a YAML syntax error in data with the line of the mistake
// where it can be known: yaml.v3 prints the line where the enclosing block
// starts (0-based for its parser's errors), so a tab in the indentation is
// looked up from there and reported on its own line.
func (d *decoder) syntax(err error, data []byte) {
	line, msg := 1, err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if l, err := strconv.Atoi(m[1]); err == nil {
			line, msg = l, m[2]
		}
		if yamlParserProblems[msg] {
			line++
		}
	}
	if strings.Contains(msg, "tab character") {
		if tab := indentTab(data, line); tab > 0 {
			line = tab
		}
	}
	d.failf(&yaml.Node{Line: line}, "yaml", "%s", msg)
}

// indentTab is the first line, from line from on (1-based), with a tab in
// the indentation before its content; 0 if none has.
func indentTab(data []byte, from int) int {
	for i, l := range strings.Split(string(data), "\n") {
		content := strings.TrimLeft(l, " \t")
		if i+1 >= from && content != "" && strings.Contains(l[:len(l)-len(content)], "\t") {
			return i + 1
		}
	}
	return 0
}

// resolve follows aliases; nil means too many.
func (d *decoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		if d.aliases++; d.aliases > maxAliases {
			d.failf(n, path, "more than %d aliases", maxAliases)
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "a document"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping returns the entries of mapping n by key. Keys outside known, and
// duplicate keys, are errors. A null node is an empty mapping; ok is false
// when n is not a mapping at all.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) (m map[string]entry, ok bool) {
	if n = d.resolve(n, path); n == nil {
		return nil, false
	}
	if isNull(n) {
		return map[string]entry{}, true
	}
	if n.Kind != yaml.MappingNode {
		d.failf(n, path, "expected a mapping, got %s", kindName(n))
		return nil, false
	}
	m = make(map[string]entry, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.failf(k, path, "keys must be strings, got %s", kindName(k))
			continue
		}
		kp := join(path, k.Value)
		switch prev, dup := m[k.Value]; {
		case k.Value == "<<":
			d.failf(k, kp, "YAML merge keys are not supported")
		case !slices.Contains(known, k.Value):
			d.failf(k, kp, "unknown key %q", k.Value)
		case dup:
			d.failf(k, kp, "duplicate key %q (first at line %d)", k.Value, prev.key.Line)
		default:
			m[k.Value] = entry{key: k, val: v, path: kp}
		}
	}
	return m, true
}

// list returns the items of sequence e, each with its indexed key path. A
// null node is an empty list.
func (d *decoder) list(e entry) ([]entry, bool) {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return nil, false
	}
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		d.failf(n, e.path, "expected a list, got %s", kindName(n))
		return nil, false
	}
	items := make([]entry, len(n.Content))
	for i, c := range n.Content {
		items[i] = entry{key: e.key, val: c, path: fmt.Sprintf("%s[%d]", e.path, i)}
	}
	return items, true
}

// str returns the scalar value of e with ${VAR} expanded.
func (d *decoder) str(e entry) (string, bool) {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.failf(n, e.path, "expected a single value, got %s", kindName(n))
		return "", false
	}
	if isNull(n) {
		d.failf(n, e.path, "missing value")
		return "", false
	}
	s, err := expand(n.Value, d.lookup)
	if err != nil {
		d.failf(n, e.path, "%v", err)
		return "", false
	}
	return s, true
}

// node returns the node to blame for e: its value, else its key.
func (e entry) node() *yaml.Node {
	if e.val != nil && e.val.Line > 0 {
		return e.val
	}
	return e.key
}

// duration decodes a non-negative duration ("2s", "1h30m", "3d").
func (d *decoder) duration(e entry) (time.Duration, bool) {
	s, ok := d.str(e)
	if !ok {
		return 0, false
	}
	v, err := parseDuration(s)
	if err != nil {
		d.failf(e.node(), e.path, "%v", err)
		return 0, false
	}
	return v, true
}

// positive decodes a duration that must be greater than zero.
func (d *decoder) positive(e entry) (time.Duration, bool) {
	v, ok := d.duration(e)
	if ok && v == 0 {
		d.failf(e.node(), e.path, "must be greater than 0")
		return 0, false
	}
	return v, ok
}

// integer decodes an integer within [lo, hi].
func (d *decoder) integer(e entry, lo, hi int) (int, bool) {
	s, ok := d.str(e)
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		d.failf(e.node(), e.path, "invalid integer %q", s)
		return 0, false
	}
	if v < lo || v > hi {
		if hi == math.MaxInt {
			d.failf(e.node(), e.path, "must be at least %d, got %d", lo, v)
		} else {
			d.failf(e.node(), e.path, "must be between %d and %d, got %d", lo, hi, v)
		}
		return 0, false
	}
	return v, true
}

// number decodes a finite decimal number.
func (d *decoder) number(e entry) (float64, bool) {
	s, ok := d.str(e)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.failf(e.node(), e.path, "invalid number %q", s)
		return 0, false
	}
	return v, true
}

// oneOf decodes a string that must be one of choices.
func (d *decoder) oneOf(e entry, what string, choices ...string) (string, bool) {
	s, ok := d.str(e)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, s) {
		d.failf(e.node(), e.path, "unknown %s %q (want one of %s)", what, s, quoteList(choices))
		return "", false
	}
	return s, true
}

// name decodes a route or destination name.
func (d *decoder) name(e entry) (string, bool) {
	s, ok := d.str(e)
	if !ok {
		return "", false
	}
	if !validName(s) {
		d.failf(e.node(), e.path, "invalid name %q: use only letters, digits, \"_\" and \"-\" (it becomes a NATS subject token)", s)
		return "", false
	}
	return s, true
}

func quoteList(s []string) string {
	var b bytes.Buffer
	for i, v := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v))
	}
	return b.String()
}
