package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jethook/jethook/admin"
)

func runDLQ(ctx context.Context, args []string, out io.Writer) error {
	return dlq(ctx, adminFromEnv(os.Getenv), args, out)
}

const dlqUsage = "want: jethook dlq ls|show SEQ|replay|purge [flags]"

// dlq runs "dlq ls|show|replay|purge" over the admin API.
func dlq(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, dlqUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(out, "Usage: jethook dlq ls|show|replay|purge [flags]")
		fmt.Fprintln(out, "\nCommands:")
		for _, sub := range []string{"ls", "show", "replay", "purge"} {
			fmt.Fprintf(out, "  %-7s %s\n", sub, summaries["dlq "+sub])
		}
		fmt.Fprintln(out, "\n`jethook dlq COMMAND -h` shows a command's flags.")
		return nil
	case "ls", "list":
		return dlqList(ctx, c, args[1:], out)
	case "show":
		return dlqShow(ctx, c, args[1:], out)
	case "replay":
		return dlqReplay(ctx, c, args[1:], out)
	case "purge":
		return dlqPurge(ctx, c, args[1:], out)
	}
	return fmt.Errorf("%w: unknown dlq command %q; %s", errUsage, args[0], dlqUsage)
}

// dlqQuery is the flags that select dead letters, which every dlq
// command shares.
type dlqQuery struct {
	route, destination, status, reason, since, until string
	seqs                                             string
}

func (f *dlqQuery) register(fs *flag.FlagSet, withSeq bool) {
	fs.StringVar(&f.route, "route", "", "only dead letters of this route")
	fs.StringVar(&f.destination, "destination", "", "only this destination (needs -route)")
	fs.StringVar(&f.status, "status", "", "last HTTP status: 503, a class such as 5xx, or none")
	fs.StringVar(&f.reason, "reason", "", "permanent or exhausted")
	fs.StringVar(&f.since, "since", "", "dead-lettered at or after: RFC 3339 time or a duration ago (2h)")
	fs.StringVar(&f.until, "until", "", "dead-lettered before: RFC 3339 time or a duration ago")
	if withSeq {
		fs.StringVar(&f.seqs, "seq", "", "comma-separated dead letter sequence numbers (instead of a query)")
	}
}

func (f *dlqQuery) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"route": f.route, "destination": f.destination, "status": f.status,
		"reason": f.reason, "since": f.since, "until": f.until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func (f *dlqQuery) selection() (admin.Selection, error) {
	sel := admin.Selection{Route: f.route, Destination: f.destination, Status: f.status, Reason: f.reason,
		Since: f.since, Until: f.until}
	if f.seqs == "" {
		return sel, nil
	}
	if f.route != "" || f.destination != "" || f.status != "" || f.reason != "" || f.since != "" || f.until != "" {
		return sel, fmt.Errorf("%w: give -seq or a query (-route, -status, …), not both", errUsage)
	}
	for _, s := range strings.Split(f.seqs, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil || n == 0 {
			return sel, fmt.Errorf("%w: -seq %q: want sequence numbers such as 12,13", errUsage, f.seqs)
		}
		sel.Seqs = append(sel.Seqs, n)
	}
	return sel, nil
}

func dlqList(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("dlq ls", out)
	var f dlqQuery
	f.register(fs, false)
	limit := fs.Int("limit", 50, "dead letters per page (at most 1000)")
	cursor := fs.String("cursor", "", "start at this cursor (printed after a full page)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	q := f.query()
	q.Set("limit", strconv.Itoa(*limit))
	if *cursor != "" {
		q.Set("cursor", *cursor)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, "/v1/deadletters", q, nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var page admin.DeadLetterPage
	if err := json.Unmarshal(raw, &page); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	if len(page.DeadLetters) == 0 && page.NextCursor == "" {
		fmt.Fprintln(out, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tROUTE\tDESTINATION\tEVENT\tREASON\tSTATUS\tATTEMPTS\tDEAD-LETTERED\tERROR")
	for _, d := range page.DeadLetters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.Seq, d.Route, d.Destination, d.EventID,
			d.Reason, statusText(d.LastStatus), d.Attempts, stamp(d.DeadLetteredAt), clip(d.LastError, 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(out, "more: jethook dlq ls -cursor %s (same query)\n", page.NextCursor)
	}
	return nil
}

func dlqShow(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("dlq show", out)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want: jethook dlq show SEQ [-json]", errUsage)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, "/v1/deadletters/"+url.PathEscape(pos[0]), nil, nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var d admin.DeadLetterDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	fmt.Fprintf(out, "dead letter %d\n", d.Seq)
	fmt.Fprintf(out, "event:         %s\n", d.EventID)
	fmt.Fprintf(out, "route:         %s -> %s\n", d.Route, d.Destination)
	fmt.Fprintf(out, "reason:        %s, %s\n", d.Reason, failureText(d.LastStatus, d.LastError))
	if d.LastError != "" && d.LastStatus != 0 {
		fmt.Fprintf(out, "last error:    %s\n", d.LastError)
	}
	fmt.Fprintf(out, "attempts:      %d\n", d.Attempts)
	fmt.Fprintf(out, "received:      %s from %s\n", stamp(d.ReceivedAt), d.RemoteAddr)
	fmt.Fprintf(out, "last attempt:  %s\n", stamp(d.LastAttempt))
	fmt.Fprintf(out, "dead-lettered: %s\n", stamp(d.DeadLetteredAt))
	if d.Replay != nil {
		fmt.Fprintf(out, "replayed:      %s (message %d)\n", stamp(d.Replay.At), d.Replay.Seq)
	}
	if d.Host != "" {
		fmt.Fprintf(out, "request:       %s %s://%s%s\n", d.Method, d.Proto, d.Host, d.RequestURI)
	} else { // no host jethook could vouch for (JETHOOK_PUBLIC_HOST)
		fmt.Fprintf(out, "request:       %s %s (%s)\n", d.Method, d.RequestURI, d.Proto)
	}
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range d.Headers[k] {
			fmt.Fprintf(out, "  %s: %s\n", k, v)
		}
	}
	body := d.Body
	if d.BodyEncoding == "base64" {
		b, _ := base64.StdEncoding.DecodeString(d.Body)
		body = fmt.Sprintf("(%d bytes, not UTF-8; base64) %s", len(b), d.Body)
	}
	fmt.Fprintf(out, "body:\n%s\n", body)
	return nil
}

// dlqReplay replays dead letters by -seq, or every one a query selects,
// page by page, printing progress; to their own destination, or with -to
// to another of their route's.
func dlqReplay(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("dlq replay", out)
	var f dlqQuery
	f.register(fs, true)
	pageSize := fs.Int("page", 500, "dead letters replayed per request (at most 1000)")
	to := fs.String("to", "", "replay to this destination of the route instead, such as a developer's pull destination (by query, needs -route and -destination)")
	asJSON := fs.Bool("json", false, "print the totals as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	sel, err := f.selection()
	if err != nil {
		return err
	}
	sel.To = *to
	var total admin.ReplayResult
	if len(sel.Seqs) > 0 {
		if err := c.call(ctx, http.MethodPost, "/v1/deadletters/replay", nil, sel, &total); err != nil {
			return err
		}
	} else {
		var count struct{ Count uint64 }
		if err := c.call(ctx, http.MethodGet, "/v1/deadletters/count", f.query(), nil, &count); err != nil {
			return err
		}
		sel.Limit = *pageSize
		for {
			var r admin.ReplayResult
			if err := c.call(ctx, http.MethodPost, "/v1/deadletters/replay", nil, sel, &r); err != nil {
				return fmt.Errorf("after %d replayed: %w", total.Queued+total.SkippedDuplicates, err)
			}
			total.Queued += r.Queued
			total.SkippedDuplicates += r.SkippedDuplicates
			if !*asJSON {
				fmt.Fprintf(out, "replayed %d/%d\n", total.Queued+total.SkippedDuplicates, max(count.Count, uint64(total.Queued+total.SkippedDuplicates)))
			}
			if r.NextCursor == "" {
				break
			}
			sel.Cursor = r.NextCursor
		}
	}
	if *asJSON {
		b, err := json.Marshal(total)
		if err != nil {
			return err
		}
		return printJSON(out, b)
	}
	fmt.Fprintf(out, "queued %d", total.Queued)
	if *to != "" {
		fmt.Fprintf(out, " to %s", *to)
	}
	fmt.Fprintf(out, ", skipped %d already replayed", total.SkippedDuplicates)
	if total.NotFound > 0 {
		fmt.Fprintf(out, ", %d not found", total.NotFound)
	}
	fmt.Fprintln(out)
	return nil
}

// dlqPurge deletes dead letters by -seq, by query, or all with -all.
func dlqPurge(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("dlq purge", out)
	var f dlqQuery
	f.register(fs, true)
	all := fs.Bool("all", false, "purge every dead letter (required when neither -seq nor a query is given)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	sel, err := f.selection()
	if err != nil {
		return err
	}
	sel.All = *all
	if len(sel.Seqs) == 0 && len(f.query()) == 0 && !sel.All {
		return fmt.Errorf("%w: name dead letters with -seq or a query, or pass -all to purge every one", errUsage)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodDelete, "/v1/deadletters", nil, sel, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var r struct{ Purged int }
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	fmt.Fprintf(out, "purged %d dead letters\n", r.Purged)
	return nil
}
