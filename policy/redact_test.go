package policy

import (
	"strings"
	"testing"
)

func TestRedactURLKeepsSchemeHostAndPathOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"a plain URL is kept", "https://backend.internal:8443/hooks/in", "https://backend.internal:8443/hooks/in"},
		{"user and password are dropped", "http://alice:S3cretPass@backend/x", "http://backend/x"},
		{"a user alone is dropped", "http://S3cretPass@backend/x", "http://backend/x"},
		{"the query is dropped", "http://backend/x?token=S3cretPass&a=1", "http://backend/x"},
		{"the fragment is dropped", "http://backend/x#S3cretPass", "http://backend/x"},
		{"all of them at once", "http://alice:S3cretPass@backend/x?token=S3cretPass#S3cretPass", "http://backend/x"},
		{"an escaped path stays escaped", "http://backend/a%2Fb?k=S3cretPass", "http://backend/a%2Fb"},
		{"an unparsable URL loses its user info and query", "http://alice:S3cretPass@backend/x%zz?token=S3cretPass", "http://backend/x%zz"},
		{"an unparsable URL with a bad fragment", "http://alice:S3cretPass@backend/x?a#%zz", "http://backend/x"},
		{"an unparsable authority", "http://alice:S3cretPass@back end/x", "http://back end/x"},
		{"an opaque URL hides its opaque part", "mailto:S3cretPass@example.com", "mailto:…"},
		{"a user before a colon reads as an opaque URL", "alice:S3cretPass@%zz", "alice:…"},
		{"no scheme and unparsable", "//alice:S3cretPass@%zz/x?q=S3cretPass", "//%zz/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := RedactURL(tc.in)
			if got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "S3cretPass") {
				t.Errorf("RedactURL(%q) = %q shows the secret", tc.in, got)
			}
		})
	}
}
