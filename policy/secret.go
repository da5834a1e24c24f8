package policy

import (
	"fmt"
	"log/slog"
)

// Secret is a credential read from the environment (${VAR}). It prints,
// formats, logs and marshals as "[redacted]", so that a log line, an error
// or a JSON document that takes a configuration value by mistake still
// shows no credential; string(s) is the value.
type Secret string

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]", also for %#v.
func (Secret) GoString() string { return redacted }

// Format writes "[redacted]" for every verb, %x and %q included.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue logs "[redacted]" (slog.LogValuer).
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText marshals "[redacted]", for JSON and YAML encoders alike.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
