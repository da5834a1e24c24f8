package policy

import (
	"fmt"
	"strings"
)

// expand replaces every ${NAME} in s with lookup(NAME), and ${NAME:-text}
// with text when NAME is unset or empty, as a shell does. "$${" stands for a
// literal "${"; any other "$" is kept as is. It runs on scalar values after
// the YAML is parsed into nodes, so a value can never add structure.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			// "$${" is an escaped "${": drop one "$", keep the rest literal.
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated \"${\"; write \"$${\" for a literal")
		}
		name, def, hasDef := strings.Cut(s[i+2:i+2+end], ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("invalid variable name %q in \"${...}\"", name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && (!ok || v == ""):
			v = def
		case !ok:
			return "", fmt.Errorf("environment variable %q is not set", name)
		}
		b.WriteString(v)
		s = s[i+2+end+1:]
	}
}

// validVarName reports whether name is a shell-style variable name.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
