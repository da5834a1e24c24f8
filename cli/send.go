package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
)

// eventHeaders are the headers naming the event that senders send besides
// their signature, which `send` fills from -event (or the default here) so
// the backend, and the sender's SDK, see a realistic request.
var eventHeaders = map[string]struct{ header, def string }{
	provider.NameGitHub:  {"X-GitHub-Event", "ping"},
	provider.NameShopify: {provider.HeaderShopifyTopic, "orders/create"},
	"gitea":              {"X-Gitea-Event", "push"},
	"forgejo":            {"X-Forgejo-Event", "push"},
	"gitlab":             {"X-Gitlab-Event", "Push Hook"},
	"bitbucket":          {"X-Event-Key", "repo:push"},
	"sentry":             {"Sentry-Hook-Resource", "issue"},
	"twitch":             {"Twitch-Eventsub-Message-Type", "notification"},
	"woocommerce":        {"X-WC-Webhook-Topic", "order.created"},
}

// senderHeaders are the other headers a sender's SDK expects, with the
// value `send` sets when -header does not: @shopify/shopify-api refuses a
// webhook without its shop domain and API version, and Twitch's EventSub
// libraries read the subscription type and version.
var senderHeaders = map[string][][2]string{
	provider.NameShopify: {
		{provider.HeaderShopifyShopDomain, "example.myshopify.com"},
		{provider.HeaderShopifyAPIVersion, "2025-07"},
	},
	"twitch": {
		{"Twitch-Eventsub-Subscription-Type", "channel.follow"},
		{"Twitch-Eventsub-Subscription-Version", "2"},
		{"Twitch-Eventsub-Message-Retry", "0"},
	},
}

// sendTimeout bounds one request of `jethook send`, answer included.
const sendTimeout = 30 * time.Second

// maxAnswer is the most of jethook's answer `send` prints.
const maxAnswer = 1 << 20

func runSend(ctx context.Context, args []string, out io.Writer) error {
	return send(ctx, args, os.Stdin, out)
}

// send signs a payload as a route's provider would and posts it to a
// running jethook, like `stripe trigger`. The payload comes from -file, or
// from stdin when -file is "-" (the default).
func send(ctx context.Context, args []string, stdin io.Reader, out io.Writer) error {
	fs := flags("send", out)
	file := fs.String("file", "-", "payload file; - reads stdin")
	base := fs.String("url", listenURL(os.Getenv("JETHOOK_LISTEN")), "jethook's base URL; the route's path is appended")
	config := fs.String("config", configDefault(), "policies file")
	secret := fs.String("secret", "", "sign with this secret instead of the route's first one")
	event := fs.String("event", "", "the event header's value where the sender has one: github X-GitHub-Event (default ping), shopify X-Shopify-Topic (default orders/create), gitlab X-Gitlab-Event, …")
	var extra headerList
	fs.Var(&extra, "header", "extra request header `Name: value`, repeatable; an id header set here is kept")
	names, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return fmt.Errorf("%w: want one route name: jethook send ROUTE [-file payload.json]", errUsage)
	}
	target, err := url.Parse(*base)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("%w: -url %q is not an http or https URL", errUsage, *base)
	}
	cfg, err := policy.Load(*config)
	if err != nil {
		return err
	}
	r, ok := cfg.Route(names[0])
	if !ok {
		return fmt.Errorf("%w: %s has no route %q", errUsage, cfg.File, names[0])
	}

	h := http.Header{}
	for _, kv := range extra {
		h.Add(kv[0], kv[1])
	}
	if eh, ok := eventHeaders[r.Provider]; ok {
		setEvent(h, eh.header, *event, eh.def)
	} else if *event != "" {
		return fmt.Errorf("%w: -event applies to routes whose sender names its event in a header (%s); route %q is %s",
			errUsage, strings.Join(slices.Sorted(maps.Keys(eventHeaders)), ", "), r.Name, r.Provider)
	}
	for _, kv := range senderHeaders[r.Provider] {
		setEvent(h, kv[0], "", kv[1])
	}

	var body []byte
	if *file == "-" {
		body, err = io.ReadAll(stdin)
	} else {
		body, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", contentType(r.Provider, body))
	}
	method := http.MethodPost
	if !slices.Contains(r.Methods, method) {
		method = r.Methods[0]
	}
	query := ""
	if r.Provider == "twilio" && !isForm(h) {
		// Twilio signs a JSON body through the URL's bodySHA256.
		sum := sha256.Sum256(body)
		query = "bodySHA256=" + hex.EncodeToString(sum[:])
	}
	preq := &provider.Request{Method: method, URL: &url.URL{Path: r.Path, RawQuery: query}, Header: h, Body: body}
	if err := sign(preq, r, *secret); err != nil {
		return fmt.Errorf("route %q: %w", r.Name, err)
	}
	body = preq.Body
	to := strings.TrimRight(target.String(), "/") + r.Path
	if query != "" {
		to += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, to, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := (&http.Client{Timeout: sendTimeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, to, err)
	}
	fmt.Fprintf(out, "%s %s: %s\n", method, to, resp.Status)
	if len(answer) > 0 {
		out.Write(answer)
		if answer[len(answer)-1] != '\n' {
			fmt.Fprintln(out)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &shownError{fmt.Errorf("%s %s: %s", method, to, resp.Status)} // printed above
	}
	return nil
}

// sign sets the headers r's provider would send for req's body (and
// rewrites the body of senders that sign inside it), signed with secret or
// else the route's first secret, at the current time.
func sign(req *provider.Request, r *policy.Route, secret string) error {
	if secret == "" && len(r.Secrets) > 0 {
		secret = r.Secrets[0]
	}
	if secret == "" && r.Provider != provider.NameNone {
		return fmt.Errorf("%w: provider %s needs a secret and the route has none; pass -secret", errUsage, r.Provider)
	}
	p, err := provider.New(r.ProviderConfig())
	if err != nil {
		return err
	}
	if err := p.Sign(req, secret, time.Now()); err != nil {
		if errors.Is(err, provider.ErrNoSigning) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	return nil
}

// isForm reports whether h says the body is form-encoded.
func isForm(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "application/x-www-form-urlencoded")
}

// setEvent sets header to event, or to def when neither event nor an
// earlier -header gave it a value.
func setEvent(h http.Header, header, event, def string) {
	switch {
	case event != "":
		h.Set(header, event)
	case h.Get(header) == "":
		h.Set(header, def)
	}
}

// contentType is JSON, except for a Slack or Twilio body that is not a
// JSON object: slash commands, interactivity payloads and Twilio's
// callbacks are form-encoded.
func contentType(providerName string, body []byte) string {
	if (providerName == provider.NameSlack || providerName == "twilio") && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return "application/x-www-form-urlencoded"
	}
	return "application/json"
}

// listenURL is the base URL of a jethook listening on listen (JETHOOK_LISTEN,
// default ":8080"): its host when it names one, else 127.0.0.1.
func listenURL(listen string) string {
	if listen == "" {
		listen = ":8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://127.0.0.1:8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// headerList collects repeated -header 'Name: value' flags.
type headerList [][2]string

func (l *headerList) String() string { return fmt.Sprint([][2]string(*l)) }

func (l *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return errors.New("want 'Name: value'")
	}
	*l = append(*l, [2]string{name, strings.TrimSpace(value)})
	return nil
}
