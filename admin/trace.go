package admin

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Attributes of the spans of an operator's acts.
const (
	// attrReplayOf is the replay span's dead letter: its sequence in the
	// dead-letter stream.
	attrReplayOf = attribute.Key("jethook.replay_of")
	// attrResendAction is what a resend did at the span's destination
	// (ResendQueued, ResendRetrying).
	attrResendAction = attribute.Key("jethook.resend_action")
)

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

// traceResend records a resend that queued a copy of e for dest, or
// brought its next attempt there forward, as a "resend" span of its
// event's trace. The copy's attempts join the same trace through the
// trace context stored with the webhook.
func (svc *Service) traceResend(ctx context.Context, e *store.Envelope, dest, action string) {
	if svc.Tracer == nil {
		return
	}
	ctx = telemetry.Restore(ctx, telemetry.Stored{Traceparent: e.Traceparent, Tracestate: e.Tracestate})
	_, span := svc.Tracer.Start(ctx, "resend", trace.WithAttributes(
		telemetry.AttrRoute.String(e.Route),
		telemetry.AttrDestination.String(dest),
		telemetry.AttrEventID.String(e.EventID),
		attrResendAction.String(action),
	))
	span.End()
}
