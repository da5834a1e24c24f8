package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
)

func runEvents(ctx context.Context, args []string, out io.Writer) error {
	return events(ctx, adminFromEnv(os.Getenv), args, out)
}

const eventsUsage = "want: jethook events show ID | search ['EXPRESSION'] | resend ID [flags]"

// events runs "events show|search|resend" over the admin API.
func events(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, eventsUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(out, "Usage: jethook events show|search|resend [flags]")
		fmt.Fprintln(out, "\nCommands:")
		for _, sub := range []string{"show", "search", "resend"} {
			fmt.Fprintf(out, "  %-7s %s\n", sub, summaries["events "+sub])
		}
		fmt.Fprintln(out, "\n`jethook events COMMAND -h` shows a command's flags.")
		return nil
	case "show":
		return eventsShow(ctx, c, args, out)
	case "search":
		return eventsSearch(ctx, c, args[1:], out)
	case "resend":
		return eventsResend(ctx, c, args[1:], out)
	}
	return fmt.Errorf("%w: unknown events command %q; %s", errUsage, args[0], eventsUsage)
}

// eventsShow runs "events show ID": when the event came in and where it
// stands at each destination, with its attempts.
func eventsShow(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("events show", out)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	route := fs.String("route", "", "the route the event came in on, when the same id came in on several")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "show" {
		return fmt.Errorf("%w: want: jethook events show EVENT_ID [-route NAME] [-json]", errUsage)
	}
	path := "/v1/events/" + url.PathEscape(pos[1])
	if *route != "" {
		path += "?route=" + url.QueryEscape(*route)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, path, nil, nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, raw)
	}
	var ev admin.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	fmt.Fprintf(out, "event %s\n", ev.EventID)
	fmt.Fprintf(out, "route:     %s\n", ev.Route)
	fmt.Fprintf(out, "received:  %s from %s (%d bytes, seq %d)\n", stamp(ev.ReceivedAt), ev.RemoteAddr, ev.Size, ev.Seq)
	if ev.CaughtUp != "" {
		fmt.Fprintf(out, "caught up: fetched from the %s API (docs/catch-up.md)\n", ev.CaughtUp)
	}
	for _, d := range ev.Destinations {
		line := fmt.Sprintf("\ndestination %s: %s", d.Destination, strings.ReplaceAll(d.State, "_", " "))
		if dl := d.DeadLetter; dl != nil {
			line += fmt.Sprintf(" (dead letter %d: %s, %s after %d attempts)", dl.Seq, dl.Reason, failureText(dl.LastStatus, dl.LastError), dl.Attempts)
		}
		if rp := d.Replay; rp != nil && rp.DeadLetter != 0 {
			line += fmt.Sprintf("; replayed %s from dead letter %d", stamp(rp.At), rp.DeadLetter)
		} else if rp != nil {
			line += fmt.Sprintf("; resent %s", stamp(rp.At))
		}
		fmt.Fprintln(out, line)
		if d.Error != "" {
			fmt.Fprintf(out, "  warning: %s\n", d.Error)
		}
		if o := d.Order; o != nil {
			fmt.Fprintln(out, "  "+orderText(o, time.Now()))
		}
		if d.Transform != "" {
			fmt.Fprintf(out, "  transform: %s (jethook transform test %s %s %s prints the request it makes)\n", d.Transform, ev.Route, d.Destination, ev.EventID)
		}
		if len(d.Attempts) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ATTEMPT\tAT\tOUTCOME\tSTATUS\tLATENCY\tNEXT\tERROR")
		for _, a := range d.Attempts {
			next := "-"
			if a.NextSeconds > 0 {
				next = brief(secs(a.NextSeconds))
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, stamp(a.At), a.Outcome, statusText(a.Status),
				brief(secs(a.LatencySeconds)), next, clip(a.Error, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, a := range d.Attempts {
			if a.Sent != nil {
				fmt.Fprintf(out, "  attempt %d sent %s\n", a.Attempt, sentText(a.Sent))
			}
		}
	}
	return nil
}

// sentText says what an attempt through a transform sent: the body's size
// and SHA-256 (compare it with `sha256sum` of what the backend got), the
// script's digest, and what the script changed.
func sentText(s *store.Sent) string {
	t := fmt.Sprintf("%d bytes, body sha256 %s; script %s", s.BodySize, s.BodySHA256, s.Script)
	changed := s.Changed
	if len(s.Headers) > 0 {
		changed = append(slices.Clip(changed), "headers "+strings.Join(s.Headers, ", "))
	}
	if len(changed) == 0 {
		return t + " changed nothing"
	}
	return t + " changed " + strings.Join(changed, "; ")
}

// orderText says where an event stands in its ordering key's queue.
func orderText(o *admin.EventOrder, now time.Time) string {
	failing := ""
	if o.HeadFailingSince != nil {
		failing = ", failing for " + age(now.Sub(*o.HeadFailingSince))
	}
	if o.Head {
		return fmt.Sprintf("order: holds key %s since %s%s; %d events wait behind it", keyText(o.Key, o.KeyHash), stamp(o.Since), failing, o.Behind)
	}
	if o.HeadSeq == 0 {
		return fmt.Sprintf("order: waits behind key %s since %s (%d ahead of it), for the events of its key that another replica or a lost index held to come back",
			keyText(o.Key, o.KeyHash), stamp(o.Since), o.Ahead)
	}
	return fmt.Sprintf("order: waits behind key %s since %s (%d ahead of it); the head is event %s (seq %d)%s",
		keyText(o.Key, o.KeyHash), stamp(o.Since), o.Ahead, o.HeadEventID, o.HeadSeq, failing)
}

// keyText shows an ordering key, which comes from a payload, quoted with
// its control characters escaped, clipped, and its hash.
func keyText(key, hash string) string {
	if key == "" {
		return "#" + hash
	}
	return fmt.Sprintf("%q (#%s)", clip(key, 60), hash)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// brief prints d to three significant figures or the second, for a
// table: 587ms, 1.25s, 42.1s, 3m12s, 5m, 48h.
func brief(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// stamp prints a time in UTC to the second; "-" for nil.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func statusText(code int) string {
	if code == 0 {
		return "-"
	}
	return fmt.Sprint(code)
}

// failureText is a dead letter's last status or error.
func failureText(status int, err string) string {
	switch {
	case status != 0:
		return fmt.Sprintf("last status %d", status)
	case err != "":
		return "last error: " + clip(err, 60)
	}
	return "no response"
}
