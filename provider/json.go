package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/payload"
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

// jsonAt returns the raw value at ptr in body. It walks the body in place
// (with gjson, which the depth check makes safe), so that a sender's wide
// object or long array costs no memory, and a body nested deeper than
// payload.MaxDepth is not read at all.
func jsonAt(body []byte, ptr string) (json.RawMessage, bool) {
	if payload.TooDeep(body) || !json.Valid(body) {
		return nil, false
	}
	v := gjson.ParseBytes(body)
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if v = member(v, tok); !v.Exists() {
			return nil, false
		}
	}
	return json.RawMessage(v.Raw), true
}

// member is the value of key tok in object v (the last one, if the key
// repeats, as encoding/json decodes it), or element tok of array v; it
// does not exist when there is none.
func member(v gjson.Result, tok string) gjson.Result {
	var found gjson.Result
	switch {
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			if k.Str == tok {
				found = e
			}
			return true
		})
	case v.IsArray():
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 {
			return found
		}
		v.ForEach(func(_, e gjson.Result) bool {
			if i == 0 {
				found = e
			}
			i--
			return i >= 0
		})
	}
	return found
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
