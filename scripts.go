package redlock

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/redis/go-redis/v9"
)

// The Lua the nodes run lives in lua/*.lua, embedded beside the Go call
// that fills its KEYS and ARGV; a script that shares a prelude (queueLua,
// identityPrelude) is assembled from the prelude's file and its own at
// init. Every key a script touches is passed in KEYS and shares the lock's
// hash tag, so a Redis Cluster can serve as one node (keys.go). They go out
// with EVALSHA, and EVAL on NOSCRIPT (scriptCall, below).

// script is a Lua script whose digest a node tells (luascript): nothing is
// hashed in Go, so the library works under GODEBUG=fips140=only, where
// go-redis's redis.NewScript panics.
type script struct{ *luascript.Script }

func newScript(src string) *script { return &script{luascript.New(src)} }

// numKeys holds the numkeys argument, as a string because go-redis's
// Cluster routing reads it as one.
var numKeys = func() (n [16]any) {
	for i := range n {
		n[i] = strconv.Itoa(i)
	}
	return n
}()

// boxKeys turns key names into script arguments.
func boxKeys(keys ...string) []any {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return args
}

// scriptCall is one script invocation that a round sends to every node. Its
// arguments are boxed once and then only read, by every node's goroutine:
// go-redis's Script.Run boxes the keys and arguments again for each node,
// which made up about a third of an uncontended acquisition's allocations.
type scriptCall struct {
	script *script
	keys   int
	// args is EVALSHA digest numkeys keys... argv..., or EVAL source ...
	// while the digest is not known; swapped once for the EVALSHA form when
	// a node has told it.
	args atomic.Pointer[[]any]
}

// newScriptCall builds a call; keys are boxed (boxKeys), so that the
// arguments a lock sends in every call are boxed once for its lifetime.
func newScriptCall(s *script, keys []any, argv ...any) *scriptCall {
	sc := &scriptCall{script: s, keys: len(keys)}
	sc.args.Store(sc.build(s.Hash(), keys, argv))
	return sc
}

// build boxes the command: EVALSHA with digest h, or EVAL if h is "".
func (sc *scriptCall) build(h string, keys, argv []any) *[]any {
	args := make([]any, 0, 3+len(keys)+len(argv))
	if h != "" {
		args = append(args, "evalsha", h)
	} else {
		args = append(args, "eval", sc.script.Source())
	}
	args = append(append(append(args, numKeys[len(keys)]), keys...), argv...)
	return &args
}

// run sends the call to node, and the script's source if the node does not
// know it yet (a fresh or restarted node), as Script.Run does.
func (sc *scriptCall) run(ctx context.Context, node redis.UniversalClient) *redis.Cmd {
	args := *sc.args.Load()
	if args[0] == "eval" {
		if h := sc.script.Hash(); h != "" {
			next := sc.build(h, args[3:3+sc.keys], args[3+sc.keys:])
			sc.args.Store(next)
			args = *next
		}
	}
	cmd := node.Do(ctx, args...)
	err := cmd.Err()
	switch {
	case args[0] == "eval":
		if luascript.Answered(err) {
			sc.script.Learn(ctx, node)
		}
	case luascript.IsNoScript(err):
		return node.Do(ctx, *sc.build("", args[3:3+sc.keys], args[3+sc.keys:])...)
	}
	return cmd
}

// outcome runs a call whose script answers 1 (done: NodeGranted) or 0 (not
// done: NodeRefused), as the acquisition, release and extension scripts do.
func (sc *scriptCall) outcome(ctx context.Context, node redis.UniversalClient) (Outcome, int64, error) {
	n, err := sc.run(ctx, node).Int64()
	switch {
	case err != nil:
		return NodeFailed, 0, err
	case n == 1:
		return NodeGranted, 0, nil
	default:
		return NodeRefused, 0, nil
	}
}
