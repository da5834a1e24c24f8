package provider

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// Info describes a preset for configuration checks and `jethook check
// -providers`.
type Info struct {
	Name string
	// Verifies says in a few words what is checked.
	Verifies string
	// ID says where the event id for deduplication comes from; "" means
	// none, so jethook dedups on a hash of the body.
	ID string
	// Handshake names the verification request answered, "" for none.
	Handshake string
	// Methods are the route's default methods.
	Methods []string
	// Tolerance is the preset's window for signed timestamps; 0 means it
	// signs none.
	Tolerance time.Duration
	// PublicURL and VerifyToken say whether the route needs those keys.
	PublicURL, VerifyToken bool
	// SigningSecret says whether the route may set signing_secret, a
	// second secret that signs the body where the first is a token.
	SigningSecret bool
	// Docs is the sender's documentation of its signature.
	Docs string
	// Sample is what the sender sends besides its signature.
	Sample Sample
}

// preset is an Info and how to build the verifier.
type preset struct {
	Info
	build func(c Config, clk clock) (Provider, error)
}

// postOnly is the default of senders without a GET handshake.
var postOnly = []string{http.MethodPost}

// fromScheme builds a preset on a fixed Scheme; adjust, if set, adds its
// handshake, id rule or id generator.
func fromScheme(s Scheme, adjust func(*signed)) func(Config, clock) (Provider, error) {
	return func(c Config, clk clock) (Provider, error) {
		p, err := compile(s, c.Secrets, c, clk)
		if err != nil {
			return nil, err
		}
		if adjust != nil {
			adjust(p)
		}
		return p, nil
	}
}

// Presets lists every preset, sorted by name.
func Presets() []Info {
	out := make([]Info, 0, len(presets))
	for _, p := range presets {
		out = append(out, p.Info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names lists the preset names, sorted.
func Names() []string {
	var out []string
	for _, p := range Presets() {
		out = append(out, p.Name)
	}
	return out
}

// Lookup returns the preset called name.
func Lookup(name string) (Info, bool) {
	p, ok := presets[name]
	return p.Info, ok
}

// presets are the built-in senders. Each is a Scheme unless it needs code;
// the Docs link is the source of every value.
var presets = map[string]preset{}

func init() {
	for _, p := range []preset{
		{Info{Name: NameNone, Verifies: "nothing (unsafe on a public URL)", Methods: postOnly},
			func(Config, clock) (Provider, error) { return none{}, nil }},
		{Info{Name: NameHMAC, Verifies: "an HMAC of the body in one header (hmac: block)", ID: "hmac.id_header", Methods: postOnly},
			func(c Config, clk clock) (Provider, error) { return compile(hmacScheme(c.HMAC), c.Secrets, c, clk) }},
		{Info{Name: NameSignature, Verifies: "the signature declared in the signature: block", ID: "signature.id_header or signature.id_json", Methods: postOnly, Tolerance: DefaultTolerance},
			func(c Config, clk clock) (Provider, error) { return compile(c.Scheme, c.Secrets, c, clk) }},
		{Info{Name: NameSendGrid, Verifies: "ECDSA P-256 signature of timestamp + body with SendGrid's public key", Methods: postOnly, Tolerance: DefaultTolerance,
			Docs: "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features"},
			newSendGrid},
		{Info{Name: NameTwilio, Verifies: "X-Twilio-Signature: base64 HMAC-SHA1 of public_url + sorted form parameters (or bodySHA256 for JSON)", ID: "I-Twilio-Idempotency-Token header", Methods: postOnly, PublicURL: true,
			Docs:   "https://www.twilio.com/docs/usage/webhooks/webhooks-security",
			Sample: Sample{Form: true, BodySHA256: true}},
			newTwilio},
		{Info{Name: NameGitLab, Verifies: "X-Gitlab-Token equals the secret; with signing_secret, also webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>",
			ID: "webhook-id header with signing_secret, else Idempotency-Key, else X-Gitlab-Event-UUID", Methods: postOnly, SigningSecret: true,
			Docs:   "https://docs.gitlab.com/user/project/integrations/webhooks/",
			Sample: Sample{EventHeader: "X-Gitlab-Event", Event: "Push Hook"}},
			newGitLab},
	} {
		presets[p.Name] = p
	}
	for _, d := range schemes {
		p := preset{Info: d.info, build: fromScheme(d.scheme, d.adjust)}
		if p.Methods == nil {
			p.Methods = postOnly
		}
		if d.scheme.timestamped() && p.Tolerance == 0 {
			p.Tolerance = DefaultTolerance
		}
		if _, dup := presets[p.Name]; dup {
			panic("provider: preset " + p.Name + " defined twice")
		}
		presets[p.Name] = p
	}
}

// hmacScheme is the Scheme of an `hmac:` block.
func hmacScheme(h HMAC) Scheme {
	s := Scheme{Headers: []string{h.Header}, Prefix: h.Prefix, Algorithm: h.Algorithm, Encoding: h.Encoding}
	if h.Header == "" {
		s.Headers = nil
	}
	if h.IDHeader != "" {
		s.IDHeaders = []string{h.IDHeader}
	}
	return s
}
