package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

func runTransform(ctx context.Context, args []string, out io.Writer) error {
	return transformTest(ctx, adminFromEnv(os.Getenv), args, out)
}

// transformTest runs "transform test ROUTE DEST (EVENT_ID | -file F)": the
// destination's transform, as policies.yaml has it now, on a stored event
// (run by the jethook the admin API reaches) or on a payload file (run
// here), and prints the request the destination would get.
func transformTest(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("transform test", out)
	config := fs.String("config", configDefault(), "policies file whose script to run")
	file := fs.String("file", "", "run on this payload file instead of a stored event; - reads stdin")
	running := fs.Bool("running", false, "run the script the running jethook loaded, not the one in -config (with EVENT_ID)")
	route := fs.String("route", "", "with EVENT_ID: the route the event came in on, when the same id came in on several")
	method := fs.String("method", http.MethodPost, "with -file: the request method")
	query := fs.String("query", "", "with -file: the query string the provider called with")
	asJSON := fs.Bool("json", false, "print the preview as JSON")
	var extra headerList
	fs.Var(&extra, "header", "with -file: a request header `Name: value`, repeatable")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	usage := fmt.Errorf("%w: want: jethook transform test ROUTE DESTINATION (EVENT_ID | -file payload.json)", errUsage)
	if len(pos) < 3 || pos[0] != "test" {
		return usage
	}
	routeName, destName := pos[1], pos[2]
	var p forward.Preview
	switch {
	case *file != "" && len(pos) == 3:
		cfg, err := policy.Load(*config)
		if err != nil {
			return err
		}
		r, d, err := destinationOf(cfg, routeName, destName)
		if err != nil {
			return err
		}
		body, err := readPayload(*file, r.MaxBody)
		if err != nil {
			return err
		}
		h := http.Header{}
		for _, kv := range extra {
			h.Add(kv[0], kv[1])
		}
		uri := r.Path
		if *query != "" {
			uri += "?" + strings.TrimPrefix(*query, "?")
		}
		now := time.Now()
		e := &store.Envelope{Route: r.Name, EventID: "preview", Method: strings.ToUpper(*method), RequestURI: uri,
			RemoteAddr: "127.0.0.1:0", ReceivedAt: now, Header: h, Body: body}
		if p, err = forward.PreviewConfig(*r, *d, e, now); err != nil {
			return err
		}
	case *file == "" && len(pos) == 4:
		req := admin.PreviewRequest{Destination: destName, Route: *route}
		if !*running {
			cfg, err := policy.Load(*config)
			if err != nil {
				return err
			}
			_, d, err := destinationOf(cfg, routeName, destName)
			if err != nil {
				return err
			}
			if d.Transform == nil {
				return fmt.Errorf("%s: route %q destination %q has no transform", cfg.File, routeName, destName)
			}
			t := d.Transform
			req.Script, req.Name, req.Env, req.Timeout = t.Script, t.Name, t.Env, t.Timeout.String()
		}
		var raw json.RawMessage
		if err := c.call(ctx, http.MethodPost, "/v1/events/"+url.PathEscape(pos[3])+"/preview", nil, req, &raw); err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("admin API answer: %w", err)
		}
	default:
		return usage
	}
	if *asJSON {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return printJSON(out, b)
	}
	printPreview(out, destName, p)
	if p.Error != "" {
		return &shownError{errors.New(p.Error)} // printed above
	}
	return nil
}

// destinationOf finds route's destination dest in cfg.
func destinationOf(cfg *policy.Config, route, dest string) (*policy.Route, *policy.Destination, error) {
	r, ok := cfg.Route(route)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s has no route %q", errUsage, cfg.File, route)
	}
	for i := range r.Destinations {
		if r.Destinations[i].Name == dest {
			return r, &r.Destinations[i], nil
		}
	}
	return nil, nil, fmt.Errorf("%w: route %q in %s has no destination %q", errUsage, route, cfg.File, dest)
}

// readPayload reads file (stdin for "-"), at most max bytes.
func readPayload(file string, max int64) ([]byte, error) {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than the route's max_body (%d bytes)", file, max)
	}
	return b, nil
}

// printPreview prints p as an HTTP request, what the script printed first.
func printPreview(out io.Writer, dest string, p forward.Preview) {
	if p.Console != "" {
		fmt.Fprint(out, p.Console)
		fmt.Fprintln(out)
	}
	switch {
	case p.Error != "":
		fmt.Fprintf(out, "%s: the transform failed; the event would be dead-lettered there:\n%s\n", dest, p.Error)
		return
	case p.Dropped:
		fmt.Fprintf(out, "%s: the transform returned null; the event would be filtered there, not sent\n", dest)
		return
	case !p.Transformed:
		fmt.Fprintf(out, "%s has no transform; it gets the webhook as stored:\n\n", dest)
	}
	target := p.URL
	if p.Query != "" {
		target += "?" + p.Query
	}
	fmt.Fprintf(out, "%s %s\n", p.Method, target)
	names := make([]string, 0, len(p.Header))
	for k := range p.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range p.Header[k] {
			fmt.Fprintf(out, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, p.Body)
}
