package policy

import "github.com/jethook/jethook/filter"

// filter decodes a destination's `filter:`, a CEL expression (package
// filter) compiled here so that a mistake in it is a config error with its
// line; the destination keeps the text, and the forwarder compiles it
// again.
func (d *decoder) filter(e entry) string {
	s, ok := d.str(e)
	if !ok {
		return ""
	}
	if _, err := filter.Compile(s); err != nil {
		d.failf(e.node(), e.path, "%v", err)
		return ""
	}
	return s
}
