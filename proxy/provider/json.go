package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// jsonPointer returns the string at an RFC 6901 pointer in a JSON body. ok
// is false when the body is not JSON, the pointer leads nowhere, or the
// value is not a string.
// https://www.rfc-editor.org/rfc/rfc6901
func jsonPointer(body []byte, ptr string) (string, bool) {
	raw, ok := jsonAt(body, ptr)
	if !ok {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// jsonScalar is jsonPointer that also takes a number, as its literal
// (Linear's webhookTimestamp is a number).
func jsonScalar(body []byte, ptr string) (string, bool) {
	raw, ok := jsonAt(body, ptr)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		return n.String(), true
	}
	return "", false
}

// jsonAt returns the raw value at ptr in body.
func jsonAt(body []byte, ptr string) (json.RawMessage, bool) {
	raw := json.RawMessage(body)
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) > 0 && raw[0] == '{':
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) != nil {
				return nil, false
			}
			v, ok := obj[tok]
			if !ok {
				return nil, false
			}
			raw = v
		case len(raw) > 0 && raw[0] == '[':
			var arr []json.RawMessage
			i, err := strconv.Atoi(tok)
			if json.Unmarshal(raw, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
				return nil, false
			}
			raw = arr[i]
		default:
			return nil, false
		}
	}
	return raw, true
}

// setPointer sets the value at a pointer of object keys in a JSON object
// body, creating objects on the way, as a number when number is set. The
// body is re-encoded (for `jethook send`, which signs what it sends).
func setPointer(body *[]byte, ptr, value string, number bool) error {
	var root map[string]any
	if len(bytes.TrimSpace(*body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(*body))
		dec.UseNumber()
		if err := dec.Decode(&root); err != nil {
			return errors.New("the payload must be a JSON object for this provider, which signs inside it")
		}
	}
	if root == nil {
		root = map[string]any{}
	}
	toks := strings.Split(ptr, "/")[1:]
	obj := root
	for _, tok := range toks[:len(toks)-1] {
		next, ok := obj[tok].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[tok] = next
		}
		obj = next
	}
	var v any = value
	if number {
		v = json.Number(value)
	}
	obj[toks[len(toks)-1]] = v
	b, err := json.Marshal(root)
	if err != nil {
		return err
	}
	*body = b
	return nil
}
