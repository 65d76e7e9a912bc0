package kind

import (
	"fmt"
	"strings"
)

// WrongTypeError is a node's refusal of a lock whose keys include one that
// holds another type than the string the library keeps there: a key-name
// clash (another application writes under the client's key prefix) or a
// key written by hand. No retry fixes it. It matches ErrWrongType, and
// names the key when the node said which (every key the fenced scripts
// read as a string: the lock key and the name's fence:high).
type WrongTypeError struct {
	Key  string // the key, "" if the node did not say which
	Type string // what it holds ("list", "hash", ...), "" if not said
	Err  error  // the node's reply
}

func (e *WrongTypeError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("redlock: a key of the lock holds a value of another type than a string (%v)", e.Err)
	}
	return fmt.Sprintf("redlock: key %s holds a %s, not the type the library keeps there: another application writes under the key "+
		"prefix (WithKeyPrefix), or the key was written by hand", e.Key, e.Type)
}

func (e *WrongTypeError) Unwrap() []error { return []error{ErrWrongType, e.Err} }

// WrongType reads a WRONGTYPE reply. The scripts name the key as
// 'WRONGTYPE key <key> holds a <type>, not a string' (lua/string_key.lua),
// which the server may follow with where in the script it was raised; a
// command's own WRONGTYPE names no key. The key holds a lock name, which
// may itself contain " holds a " or ", not a string": it is parsed from the
// end, where the type is one word the server chose.
func WrongType(err error) *WrongTypeError {
	e := &WrongTypeError{Err: err}
	msg, ok := strings.CutPrefix(err.Error(), "WRONGTYPE key ")
	end := strings.LastIndex(msg, ", not a ") // a string; the family's Inspect: a sorted set
	if !ok || end < 0 {
		return e
	}
	msg = msg[:end]
	if i := strings.LastIndex(msg, " holds a "); i >= 0 {
		e.Key, e.Type = msg[:i], msg[i+len(" holds a "):]
	}
	return e
}
