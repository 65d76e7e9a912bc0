// Package luascript runs Lua scripts on Redis and Valkey without hashing
// anything in Go, so that it works in FIPS 140-only mode
// (GODEBUG=fips140=only), where go-redis's redis.NewScript panics: it
// computes the script's SHA-1 with crypto/sha1, which that mode forbids.
//
// A script goes out with EVAL (its source) until one node has told the
// digest: after the first EVAL that succeeds, the node is asked once for
// redis.sha1hex of the source, computed by the server. From then on calls
// go out with EVALSHA, and with EVAL again on NOSCRIPT (a fresh or
// restarted node). Asking through EVAL, rather than SCRIPT LOAD, needs no
// permission beyond the +eval a least-privilege ACL user already has.
package luascript

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// digestScript returns the digest the server files a script under.
const digestScript = `return redis.sha1hex(ARGV[1])`

// Script is a Lua script whose digest is learnt from the first node that
// runs it. Its methods are safe for concurrent use.
type Script struct {
	src      string
	hash     atomic.Pointer[string]
	learning atomic.Bool // one call at a time asks for the digest
}

// New returns the script with source src. It computes nothing.
func New(src string) *Script { return &Script{src: src} }

// Source is the script's Lua source.
func (s *Script) Source() string { return s.src }

// Hash is the script's SHA-1 digest as a node reported it, or "" while no
// node has yet.
func (s *Script) Hash() string {
	if h := s.hash.Load(); h != nil {
		return *h
	}
	return ""
}

// Learn asks node for the script's digest if it is not known yet and no
// other call is asking. Call it after an EVAL of the script succeeded on
// node: the digest then names a script the node has, so the next call to
// it can go out with EVALSHA. A failure leaves the digest unknown, to be
// asked again after a later EVAL.
func (s *Script) Learn(ctx context.Context, node redis.Scripter) {
	if s.hash.Load() != nil || !s.learning.CompareAndSwap(false, true) {
		return
	}
	defer s.learning.Store(false)
	h, err := node.Eval(ctx, digestScript, nil, s.src).Text()
	if err == nil && isDigest(h) {
		s.hash.CompareAndSwap(nil, &h)
	}
}

// isDigest reports whether h is a SHA-1 digest in lower-case hex, as
// redis.sha1hex writes it: anything else would make every EVALSHA fail.
func isDigest(h string) bool {
	if len(h) != 40 {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsNoScript reports whether err says the node does not have the script.
func IsNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// Run runs the script on node: with EVALSHA once the digest is known, and
// with EVAL when it is not or when the node does not have the script.
func (s *Script) Run(ctx context.Context, node redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if h := s.Hash(); h != "" {
		cmd := node.EvalSha(ctx, h, keys, args...)
		if !IsNoScript(cmd.Err()) {
			return cmd
		}
		return node.Eval(ctx, s.src, keys, args...)
	}
	cmd := node.Eval(ctx, s.src, keys, args...)
	if Answered(cmd.Err()) {
		s.Learn(ctx, node)
	}
	return cmd
}

// Answered reports whether err, from an EVAL, came from the node (or is
// nil): the node then ran the script and has it. A network error says
// nothing about that.
func Answered(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply)
}
