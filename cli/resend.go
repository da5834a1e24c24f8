package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/jethook/jethook/admin"
)

// eventsResend runs "events resend ID": delivers an event again, or
// retries it now, at one destination or every one of its route.
func eventsResend(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("events resend", out)
	var req admin.ResendRequest
	fs.StringVar(&req.Route, "route", "", "the route the event came in on, when the same id came in on several")
	fs.StringVar(&req.Destination, "destination", "", "resend to this destination only (default: every destination whose filter took it)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want: jethook events resend EVENT_ID [-destination NAME] [-route NAME]", errUsage)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, "/v1/events/"+url.PathEscape(pos[0])+"/resend", nil, req, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var res admin.ResendResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	for _, o := range res.Destinations {
		fmt.Fprintf(out, "%s → %s: %s, %s\n", res.Route, o.Destination, strings.ReplaceAll(o.State, "_", " "), resendText[o.Action])
	}
	return nil
}

// resendText says what a resend did.
var resendText = map[string]string{
	admin.ResendQueued:    "queued to be delivered again now (attempts start at 1)",
	admin.ResendReplayed:  "its dead letter replayed",
	admin.ResendRetrying:  "its next retry brought forward to now",
	admin.ResendDuplicate: "already queued again; nothing more done",
	admin.ResendWaiting:   "already on its way; nothing done",
	admin.ResendSkipped:   "skipped (its filter did not take it, or the destination has no consumer)",
}
