package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// setting is one retry field as written in a `retry:` block, with where it
// was written, so an error found after merging can point at it.
type setting[T any] struct {
	v    T
	set  bool
	node *yaml.Node
	path string
}

// origin is where a setting was written, if it was.
type origin struct {
	node *yaml.Node
	path string
	set  bool
}

func (s setting[T]) origin() origin { return origin{s.node, s.path, s.set} }

// blame returns the node and key path of the first origin that was written,
// else at and path.
func blame(at *yaml.Node, path string, cands ...origin) (*yaml.Node, string) {
	for _, c := range cands {
		if c.set {
			return c.node, c.path
		}
	}
	return at, path
}

func (s *setting[T]) merge(o setting[T]) {
	if o.set {
		*s = o
	}
}

// retrySpec is a `retry:` block as written: only the fields it sets.
type retrySpec struct {
	kind          setting[Backoff]
	interval      setting[time.Duration]
	base          setting[time.Duration]
	step          setting[time.Duration]
	multiplier    setting[float64]
	maxDelay      setting[time.Duration]
	jitter        setting[Jitter]
	maxAttempts   setting[int]
	maxAge        setting[time.Duration]
	retryAfterMax setting[time.Duration]
	retryOn       setting[[]StatusMatch]
}

func set[T any](s *setting[T], e entry, v T, ok bool) {
	if ok {
		*s = setting[T]{v: v, set: true, node: e.node(), path: e.path}
	}
}

// retrySpec decodes a `retry:` block; each field is checked on its own here,
// and against the others once merged (see retry).
func (d *decoder) retrySpec(n *yaml.Node, path string) retrySpec {
	var s retrySpec
	m, ok := d.mapping(n, path, "backoff", "delay", "base", "step", "multiplier", "max_delay",
		"jitter", "max_attempts", "max_age", "retry_after_max", "retry_on")
	if !ok {
		return s
	}
	if e, ok := m["backoff"]; ok {
		v, ok := d.oneOf(e, "backoff", string(BackoffFixed), string(BackoffLinear), string(BackoffExponential))
		set(&s.kind, e, Backoff(v), ok)
	}
	if e, ok := m["delay"]; ok {
		v, ok := d.duration(e)
		set(&s.interval, e, v, ok)
	}
	if e, ok := m["base"]; ok {
		v, ok := d.positive(e)
		set(&s.base, e, v, ok)
	}
	if e, ok := m["step"]; ok {
		v, ok := d.duration(e)
		set(&s.step, e, v, ok)
	}
	if e, ok := m["multiplier"]; ok {
		v, ok := d.number(e)
		set(&s.multiplier, e, v, ok)
	}
	if e, ok := m["max_delay"]; ok {
		v, ok := d.positive(e)
		set(&s.maxDelay, e, v, ok)
	}
	if e, ok := m["jitter"]; ok {
		v, ok := d.oneOf(e, "jitter", string(JitterNone), string(JitterFull), string(JitterEqual), string(JitterDecorrelated))
		set(&s.jitter, e, Jitter(v), ok)
	}
	if e, ok := m["max_attempts"]; ok {
		v, ok := d.integer(e, 1, maxAttemptsLimit)
		set(&s.maxAttempts, e, v, ok)
	}
	if e, ok := m["max_age"]; ok {
		v, ok := d.positive(e)
		set(&s.maxAge, e, v, ok)
	}
	if e, ok := m["retry_after_max"]; ok {
		v, ok := d.duration(e)
		set(&s.retryAfterMax, e, v, ok)
	}
	if e, ok := m["retry_on"]; ok {
		v, ok := d.retryOn(e)
		set(&s.retryOn, e, v, ok)
	}
	return s
}

// retryOn decodes the list of transient statuses.
func (d *decoder) retryOn(e entry) ([]StatusMatch, bool) {
	items, ok := d.list(e)
	if !ok {
		return nil, false
	}
	out := make([]StatusMatch, 0, len(items))
	for _, it := range items {
		s, ok := d.str(it)
		if !ok {
			return nil, false
		}
		m, err := parseStatus(s)
		if err != nil {
			d.failf(it.node(), it.path, "%v", err)
			return nil, false
		}
		if slices.Contains(out, m) {
			d.failf(it.node(), it.path, "duplicate status %q", s)
			return nil, false
		}
		out = append(out, m)
	}
	return out, true
}

// retry merges the given `retry:` blocks, later over earlier, over
// DefaultRetry, fills the derived defaults (step = base, retry_after_max =
// max_delay) and checks the fields against each other. at and path locate
// errors about fields no block set.
func (d *decoder) retry(at *yaml.Node, path string, specs ...retrySpec) Retry {
	var s retrySpec
	for _, o := range specs {
		s.kind.merge(o.kind)
		s.interval.merge(o.interval)
		s.base.merge(o.base)
		s.step.merge(o.step)
		s.multiplier.merge(o.multiplier)
		s.maxDelay.merge(o.maxDelay)
		s.jitter.merge(o.jitter)
		s.maxAttempts.merge(o.maxAttempts)
		s.maxAge.merge(o.maxAge)
		s.retryAfterMax.merge(o.retryAfterMax)
		s.retryOn.merge(o.retryOn)
	}
	r := DefaultRetry()
	apply(&r.Kind, s.kind)
	apply(&r.Interval, s.interval)
	apply(&r.Base, s.base)
	r.Step = r.Base
	apply(&r.Step, s.step)
	apply(&r.Multiplier, s.multiplier)
	apply(&r.MaxDelay, s.maxDelay)
	apply(&r.Jitter, s.jitter)
	apply(&r.MaxAttempts, s.maxAttempts)
	apply(&r.MaxAge, s.maxAge)
	r.RetryAfterMax = r.MaxDelay
	apply(&r.RetryAfterMax, s.retryAfterMax)
	apply(&r.RetryOn, s.retryOn)

	if r.Kind == BackoffExponential && r.Multiplier <= 1 {
		n, p := blame(at, path, s.multiplier.origin())
		d.failf(n, p, "multiplier must be greater than 1 for exponential backoff, got %g", r.Multiplier)
	}
	if r.Kind == BackoffFixed && r.Interval > r.MaxDelay {
		n, p := blame(at, path, s.interval.origin(), s.maxDelay.origin())
		d.failf(n, p, "delay %v exceeds max_delay %v", r.Interval, r.MaxDelay)
	}
	if (r.Kind != BackoffFixed || r.Jitter == JitterDecorrelated) && r.Base > r.MaxDelay {
		n, p := blame(at, path, s.base.origin(), s.maxDelay.origin())
		d.failf(n, p, "base %v exceeds max_delay %v", r.Base, r.MaxDelay)
	}
	return r
}

func apply[T any](dst *T, s setting[T]) {
	if s.set {
		*dst = s.v
	}
}

// unused warns of the settings route's own retry block, spec, sets that
// its backoff, r.Kind, does not use: `{backoff: fixed, base: 300ms}`
// waits delay (30s by default), not 300ms. The defaults block is not
// checked: a route may change the backoff and use them.
func (d *decoder) unused(route string, r Retry, spec retrySpec) {
	unused := map[Backoff][]origin{
		BackoffFixed:       {spec.step.origin(), spec.multiplier.origin()},
		BackoffLinear:      {spec.interval.origin(), spec.multiplier.origin()},
		BackoffExponential: {spec.interval.origin(), spec.step.origin()},
	}[r.Kind]
	if r.Kind == BackoffFixed && r.Jitter != JitterDecorrelated {
		unused = append(unused, spec.base.origin())
	}
	uses := map[Backoff]string{
		BackoffFixed:       fmt.Sprintf("waits delay (%v) before each retry", r.Interval),
		BackoffLinear:      "waits base + (n−1)·step",
		BackoffExponential: "waits base·multiplier^(n−1), at most max_delay",
	}[r.Kind]
	for _, o := range unused {
		if !o.set {
			continue
		}
		line := 1
		if o.node != nil && o.node.Line > 0 {
			line = o.node.Line
		}
		key := o.path[strings.LastIndexByte(o.path, '.')+1:]
		d.warns = append(d.warns, fmt.Sprintf("%s:%d: route %q: retry.%s has no effect with backoff %s, which %s", d.file, line, route, key, r.Kind, uses))
	}
}
