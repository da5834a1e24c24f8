package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jethook/jethook/admin"
)

func runStatus(ctx context.Context, args []string, out io.Writer) error {
	return status(ctx, adminFromEnv(os.Getenv), args, out)
}

// status prints each destination's backlog, dead letters, breaker and
// pause state, learned limit, and its last success and failure. A pull
// destination's state is pull, and its IN FLIGHT the webhooks leased to
// its clients.
func status(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("status", out)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, "/v1/status", nil, nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var st admin.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tDESTINATION\tSTATE\tLIMIT\tPENDING\tIN FLIGHT\tIN BACKOFF\tDEAD\tOLDEST\tLAST SUCCESS\tLAST FAILURE")
	for _, d := range st.Destinations {
		oldest := "-"
		if d.OldestPendingAt != nil {
			oldest = age(time.Duration(d.OldestPendingAgeSeconds * float64(time.Second)))
		}
		failure := ago(d.LastFailureAt, now)
		if d.LastFailureAt != nil {
			failure += ": " + clip(lastFailure(d), 40)
		}
		inFlight := d.InFlight
		if d.Pull {
			inFlight = d.Leased // a pull destination's attempts are its leases
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", d.Route, d.Destination, destState(d),
			limitText(d.LimitPerSecond), d.Pending, inFlight, d.InBackoff, d.DeadLetters, oldest, ago(d.LastSuccessAt, now), failure)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range st.Destinations {
		if d.DeliveredBy == "another replica" {
			fmt.Fprintf(out, "ordering: %s/%s is delivered by another replica, one at a time\n", d.Route, d.Destination)
		}
		if d.BlockedKeys+d.WaitingBehindKeys > 0 {
			oldest := ""
			if d.OldestBlockedAt != nil {
				oldest = fmt.Sprintf(", the oldest failing for %s", age(now.Sub(*d.OldestBlockedAt)))
			}
			fmt.Fprintf(out, "ordering: %s/%s: %d keys blocked by a failing event%s; %d events waiting behind their key\n",
				d.Route, d.Destination, d.BlockedKeys, oldest, d.WaitingBehindKeys)
			for _, k := range d.OldestBlockedKeys {
				fmt.Fprintf(out, "  key %s: event %s failing since %s, %d waiting behind it\n",
					keyText(k.Key, k.KeyHash), k.HeadEventID, stamp(k.FailingSince), k.Waiting)
			}
		}
		if d.Error != "" {
			fmt.Fprintf(out, "warning: %s/%s: %s\n", d.Route, d.Destination, d.Error)
		}
	}
	return catchUpTable(out, st, now)
}

// catchUpTable prints each route's catch-up (docs/catch-up.md), if any.
func catchUpTable(out io.Writer, st admin.Status, now time.Time) error {
	if len(st.CatchUp) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CATCH-UP\tPROVIDER\tRECOVERED\tREDELIVERIES ASKED\tLAST PASS\tLAST SUCCESS\tLAST ERROR")
	for _, c := range st.CatchUp {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", c.Route, c.Provider, c.Recovered, c.Requested,
			ago(c.LastPassAt, now), ago(c.LastSuccessAt, now), clip(cmp.Or(c.LastError, "-"), 60))
	}
	return tw.Flush()
}

// destState sums up a destination's gate: paused, breaker open or
// half-open, waiting for a Retry-After, held under its rate by the learned
// limit, or ok; or, for a pull destination, which has no gate but the
// pause, pull.
func destState(d admin.DestinationStatus) string {
	switch {
	case d.Paused:
		return "paused"
	case d.Pull:
		return "pull"
	case d.Breaker != "closed" && d.Breaker != "":
		return "breaker " + d.Breaker
	case d.RetryAfterUntil != nil:
		return "retry-after"
	case d.SlowStart:
		return "limited"
	}
	return "ok"
}

func lastFailure(d admin.DestinationStatus) string {
	if d.LastError != "" {
		return d.LastError
	}
	return "status " + strconv.Itoa(d.LastStatus)
}
