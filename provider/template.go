package provider

import (
	"fmt"
	"net/http"
	"strings"
)

// Kinds of a [template] part.
const (
	partLiteral = iota
	partBody
	partTimestamp
	partID
	partMethod
	partURL
	partDecodedURL
	partHeader
	partJSON
)

// template is a parsed signed-string template ([Scheme].Signed): literal
// text and placeholders.
//
//	{body}         the raw body
//	{timestamp}    the signed timestamp, as sent
//	{id}           the value of the first id header
//	{method}       the request method
//	{url}          public_url plus "?" and the query, if any
//	{decoded_url}  {url} with HubSpot's list of escapes decoded
//	{header:Name}  the value of a request header
//	{json:/ptr}    the string (or number) at a JSON pointer in the body
type template []part

type part struct {
	kind int
	arg  string // the literal, header name or pointer
}

// parseTemplate parses s; "" is "{body}". Errors name the placeholder.
func parseTemplate(s string) (template, error) {
	if s == "" {
		return template{{kind: partBody}}, nil
	}
	var t template
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			t = append(t, part{kind: partLiteral, arg: s})
			break
		}
		if i > 0 {
			t = append(t, part{kind: partLiteral, arg: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("signed: %q is not closed with }", s[i:])
		}
		name := s[i+1 : i+j]
		s = s[i+j+1:]
		p, err := placeholder(name)
		if err != nil {
			return nil, err
		}
		t = append(t, p)
	}
	return t, nil
}

func placeholder(name string) (part, error) {
	switch name {
	case "body":
		return part{kind: partBody}, nil
	case "timestamp":
		return part{kind: partTimestamp}, nil
	case "id":
		return part{kind: partID}, nil
	case "method":
		return part{kind: partMethod}, nil
	case "url":
		return part{kind: partURL}, nil
	case "decoded_url":
		return part{kind: partDecodedURL}, nil
	}
	if h, ok := strings.CutPrefix(name, "header:"); ok {
		if !validHeaderName(h) {
			return part{}, fmt.Errorf("signed: {%s}: %q is not a valid header name", name, h)
		}
		return part{kind: partHeader, arg: h}, nil
	}
	if ptr, ok := strings.CutPrefix(name, "json:"); ok {
		if !strings.HasPrefix(ptr, "/") {
			return part{}, fmt.Errorf("signed: {%s}: a JSON pointer starts with /", name)
		}
		return part{kind: partJSON, arg: ptr}, nil
	}
	return part{}, fmt.Errorf("signed: unknown placeholder {%s} (want body, timestamp, id, method, url, decoded_url, header:Name or json:/pointer)", name)
}

// uses reports whether t has a part of kind.
func (t template) uses(kind int) bool {
	for _, p := range t {
		if p.kind == kind {
			return true
		}
	}
	return false
}

// signsHeader reports whether t holds {header:name}.
func (t template) signsHeader(name string) bool {
	for _, p := range t {
		if p.kind == partHeader && http.CanonicalHeaderKey(p.arg) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
}

// pointers returns the JSON pointers t reads.
func (t template) pointers() []string {
	var out []string
	for _, p := range t {
		if p.kind == partJSON {
			out = append(out, p.arg)
		}
	}
	return out
}

// render returns the signed string of r as parts, without copying the body.
// A placeholder whose value r lacks is a malformed request.
func (t template) render(r *Request, ts, publicURL string, idHeaders []string) ([][]byte, error) {
	out := make([][]byte, 0, len(t))
	for _, p := range t {
		switch p.kind {
		case partLiteral:
			out = append(out, []byte(p.arg))
		case partBody:
			out = append(out, r.Body)
		case partTimestamp:
			out = append(out, []byte(ts))
		case partID:
			id := r.Header.Get(idHeaders[0])
			if id == "" {
				return nil, fail(ReasonMalformedSignature, idHeaders[0]+" header is missing")
			}
			out = append(out, []byte(id))
		case partMethod:
			out = append(out, []byte(r.Method))
		case partURL:
			out = append(out, []byte(signedURL(publicURL, r)))
		case partDecodedURL:
			out = append(out, []byte(hubspotDecode(signedURL(publicURL, r))))
		case partHeader:
			v := r.Header.Get(p.arg)
			if v == "" {
				return nil, fail(ReasonMalformedSignature, p.arg+" header is missing")
			}
			out = append(out, []byte(v))
		case partJSON:
			v, ok := jsonScalar(r.Body, p.arg)
			if !ok {
				return nil, fail(ReasonMalformedSignature, "the body has no signed field at "+p.arg)
			}
			out = append(out, []byte(v))
		}
	}
	return out, nil
}

// signedURL is the URL as the sender called it: public_url and the query.
func signedURL(publicURL string, r *Request) string {
	if q := r.rawQuery(); q != "" {
		return publicURL + "?" + q
	}
	return publicURL
}

// hubspotEscapes are the escapes HubSpot decodes in the URI it signs.
// https://developers.hubspot.com/docs/apps/legacy-apps/authentication/validating-requests#validate-the-v3-request-signature
var hubspotEscapes = strings.NewReplacer(
	"%3A", ":", "%2F", "/", "%3F", "?", "%40", "@", "%21", "!", "%24", "$",
	"%27", "'", "%28", "(", "%29", ")", "%2A", "*", "%2C", ",", "%3B", ";",
	"%3a", ":", "%2f", "/", "%3f", "?", "%2a", "*", "%2c", ",", "%3b", ";",
)

func hubspotDecode(u string) string { return hubspotEscapes.Replace(u) }
