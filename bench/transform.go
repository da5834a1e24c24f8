package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/transform"
)

// TypicalTransform is the script the transform scenario gives the
// destination: it renames the body's fields and adds two headers, the
// typical reshaping of a webhook for a legacy endpoint.
const TypicalTransform = `addHandler('transform', (request, context) => {
  const { id, type, pad } = request.body;
  request.body = { event_id: id, event_type: type, data: pad };
  request.headers['x-event-type'] = type;
  request.headers['x-tenant'] = 'bench';
  return request;
});
`

// TransformResult compares delivering Events webhooks through jethook to a
// destination without a transform and to one with TypicalTransform, both
// sustained and from a backlog (as EndToEnd measures them).
type TransformResult struct {
	Events                     int
	Plain, Transformed         Delivery // sustained
	PlainDrain, TransformDrain Delivery // from a backlog
}

// Transform runs the end-to-end deliveries of EndToEnd without and with a
// transform on the destination. o.DrainProfile, if not nil, gets a CPU
// profile of the drain through the transform.
func Transform(ctx context.Context, o Options) (TransformResult, error) {
	o.applyDefaults()
	r := TransformResult{Events: o.Events}
	var err error
	for _, c := range []struct {
		to      *Delivery
		backlog bool
		script  string
		profile io.Writer
	}{
		{&r.Plain, false, "", nil}, {&r.Transformed, false, TypicalTransform, nil},
		{&r.PlainDrain, true, "", nil}, {&r.TransformDrain, true, TypicalTransform, o.DrainProfile},
	} {
		if *c.to, err = deliver(ctx, o, c.backlog, c.script, c.profile); err != nil {
			return r, fmt.Errorf("transform %v, backlog %v: %w", c.script != "", c.backlog, err)
		}
	}
	return r, nil
}

// withTransform gives cfg's one destination script as its transform.
func withTransform(cfg *policy.Config, script string) {
	if script == "" {
		return
	}
	cfg.Routes[0].Destinations[0].Transform = &policy.Transform{Script: script, Name: "bench.js",
		Timeout: transform.DefaultTimeout, Memory: transform.DefaultMemory}
}
