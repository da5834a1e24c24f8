package provider

import (
	"errors"
	"strings"
)

// maxElements bounds the elements read from one signature header, so a
// hostile header costs little.
const maxElements = 64

// list is a parsed signature header of elements such as Stripe's
// "t=1492774577,v1=5257a8…,v0=6ffbb5…".
type list struct {
	timestamp  string
	signatures []string
}

// parseList splits v at sep into key<assign>value elements, keeping the
// values of sigKey (every element when sigKey is "") and the value of tsKey.
// Elements are taken as they are, as Stripe's libraries do, except that a
// space separator splits at runs of whitespace (Standard Webhooks). It fails
// on an empty element, an element without assign (when keys are used), an
// empty or repeated timestamp, and more than maxElements elements. Errors
// never quote v.
func parseList(v, sep, assign, sigKey, tsKey string) (list, error) {
	var l list
	n := 0
	split := strings.SplitSeq(v, sep)
	if sep == " " {
		split = strings.FieldsSeq(v)
	}
	for el := range split {
		if el == "" {
			return list{}, errors.New("has an empty element")
		}
		if n++; n > maxElements {
			return list{}, errors.New("has too many elements")
		}
		if sigKey == "" && tsKey == "" {
			l.signatures = append(l.signatures, el)
			continue
		}
		k, val, ok := strings.Cut(el, assign)
		if !ok || k == "" {
			if sigKey == "" {
				l.signatures = append(l.signatures, el)
				continue
			}
			return list{}, errors.New("has an element that is not key" + assign + "value")
		}
		switch k {
		case tsKey:
			if l.timestamp != "" {
				return list{}, errors.New("has more than one timestamp")
			}
			if val == "" {
				return list{}, errors.New("has an empty timestamp")
			}
			l.timestamp = val
		case sigKey:
			l.signatures = append(l.signatures, val)
		default:
			if sigKey == "" {
				l.signatures = append(l.signatures, el)
			}
		}
	}
	return l, nil
}
