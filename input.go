package redlock

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// validateName refuses, before anything is sent, a lock name that cannot
// make a key. The key is "<prefix>:{<name>}": its hash tag is the name up to
// its first '}', so braces inside a name keep every key of the lock in one
// hash slot and cannot make two names share a key (the prefix holds no
// braces, so the key's first '{' ends the prefix). Only a leading '}' leaves
// the tag empty.
func validateName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %d bytes, at most %d; it begins %q", ErrNameTooLong, len(name), MaxNameLength, head(name, 32))
	case name[0] == '}':
		return fmt.Errorf("%w: %q", ErrBadName, head(name, 64))
	}
	return nil
}

// head is s cut to at most n bytes, on a rune boundary, for error messages
// that must not carry a whole, possibly huge, input.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validateKeyPrefix refuses a prefix that would let two clients' keys
// alias: with "app" and "app:{x}" as prefixes, the names "x}:{y" and "y"
// would share the key "app:{x}:{y}" while minting tokens from two node-id
// namespaces ("app:node-id", "app:{x}:node-id"). An empty prefix is refused
// too: it is nearly always an unset setting, and it would silently put the
// client in another namespace than its peers, where they do not exclude it.
func validateKeyPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("%w: got an empty prefix", ErrBadKeyPrefix)
	case strings.ContainsAny(prefix, "{}"):
		return fmt.Errorf("%w: got %q", ErrBadKeyPrefix, head(prefix, 64))
	}
	return nil
}

// isNil reports a nil node, including a nil pointer in a non-nil interface
// (var c *redis.Client; nodes = append(nodes, c)), which a plain == nil
// misses and which would panic in a node goroutine on the first call.
func isNil(n any) bool {
	if n == nil {
		return true
	}
	switch v := reflect.ValueOf(n); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}
