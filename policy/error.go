package policy

import "fmt"

// Error is one problem at one place in a policies file. Parse returns a
// single *Error, or several joined with errors.Join (use errors.As to reach
// the first). Its text has the form "<file>:<line>: <key path>: <message>",
// like a compiler's, so editors can jump to it.
type Error struct {
	File string // the file name given to Parse
	Line int    // 1-based line of the offending node
	Key  string // key path, e.g. "routes[0].retry.base"
	Msg  string // what is wrong; never contains a secret
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Msg)
}
