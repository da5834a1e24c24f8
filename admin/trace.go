package admin

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// attrReplayOf is the replay span's dead letter: its sequence in the
// dead-letter stream.
const attrReplayOf = attribute.Key("jethook.replay_of")

// traceReplays records each dead letter an operator replayed (to its own
// destination, or to the destination to when it is not empty) as a
// "replay" span of its event's trace. The replayed
// attempts join the same trace through the trace context stored with the
// webhook; the span shows when the replay was asked for.
func (svc *Service) traceReplays(ctx context.Context, dls []store.DeadLetter, to string) {
	if svc.Tracer == nil {
		return
	}
	for _, d := range dls {
		e := d.Envelope
		dest := d.Destination
		if to != "" {
			dest = to
		}
		ctx := telemetry.Restore(ctx, telemetry.Stored{Traceparent: e.Traceparent, Tracestate: e.Tracestate})
		_, span := svc.Tracer.Start(ctx, "replay", trace.WithAttributes(
			telemetry.AttrRoute.String(e.Route),
			telemetry.AttrDestination.String(dest),
			telemetry.AttrEventID.String(e.EventID),
			attrReplayOf.Int64(int64(d.DLQSeq)),
		))
		span.End()
	}
}
