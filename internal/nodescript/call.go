package nodescript

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/redis/go-redis/v9"
)

// numKeys holds the numkeys argument, as a string because go-redis's
// Cluster routing reads it as one.
var numKeys = func() (n [16]any) {
	for i := range n {
		n[i] = strconv.Itoa(i)
	}
	return n
}()

// numKeysArg is numkeys for n keys: a multi-lock passes more than a
// mutex's few.
func numKeysArg(n int) any {
	if n < len(numKeys) {
		return numKeys[n]
	}
	return strconv.Itoa(n)
}

// BoxKeys turns key names into script arguments.
func BoxKeys(keys ...string) []any {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return args
}

// Call is one script invocation that a round sends to every node. Its
// arguments are boxed once and then only read, by every node's goroutine:
// go-redis's Script.Run boxes the keys and arguments again for each node,
// which made up about a third of an uncontended acquisition's allocations.
type Call struct {
	script *luascript.Script
	keys   int
	// args is EVALSHA digest numkeys keys... argv..., or EVAL source ...
	// while the digest is not known; swapped once for the EVALSHA form when
	// a node has told it.
	args atomic.Pointer[[]any]
}

// NewCall builds a call; keys are boxed (BoxKeys), so that the arguments a
// lock sends in every call are boxed once for its lifetime.
func NewCall(s *luascript.Script, keys []any, argv ...any) *Call {
	sc := &Call{script: s, keys: len(keys)}
	sc.args.Store(sc.build(s.Hash(), keys, argv))
	return sc
}

// build boxes the command: EVALSHA with digest h, or EVAL if h is "".
func (sc *Call) build(h string, keys, argv []any) *[]any {
	args := make([]any, 0, 3+len(keys)+len(argv))
	if h != "" {
		args = append(args, "evalsha", h)
	} else {
		args = append(args, "eval", sc.script.Source())
	}
	args = append(append(append(args, numKeysArg(len(keys))), keys...), argv...)
	return &args
}

// Command is the call as one EVALSHA command, or nil while the script's
// digest is not known (Run sends its source, and learns the digest). A
// node that answers NOSCRIPT did not run it: Run sends the source then.
func (sc *Call) Command() []any {
	args := *sc.args.Load()
	if args[0] == "eval" {
		h := sc.script.Hash()
		if h == "" {
			return nil
		}
		next := sc.build(h, args[3:3+sc.keys], args[3+sc.keys:])
		sc.args.Store(next)
		args = *next
	}
	return args
}

// Run sends the call to node, and the script's source if the node does not
// know it yet (a fresh or restarted node), as Script.Run does.
func (sc *Call) Run(ctx context.Context, node redis.UniversalClient) *redis.Cmd {
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
