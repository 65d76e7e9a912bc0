package redlock

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/redis/go-redis/v9"
)

// The Lua the nodes run. Every key a script touches is passed in KEYS and
// shares the lock's hash tag, so a Redis Cluster can serve as one node.
// They go out with EVALSHA, and EVAL on NOSCRIPT (scriptCall, at the bottom).

// queueLua is the waiting line shared by the acquisition and release
// scripts: the fair handoff of a contended lock (docs/design.md).
//
// Every attempt of a waiter in Lock (WAITER, stable across its attempts)
// that a node refuses puts it in that node's queue, and refreshes when it
// was last seen there. (An attempt granted does not: most locks are free
// when asked for, and queueing every attempt was a fifth of an uncontended
// Lock's node time.) Its
// place is the node's own time at the attempt minus how long the waiter says
// it has waited already (WAITED, measured on the client's monotonic clock;
// 0 on its first attempt), the lowest over its attempts: a copy of an
// attempt that sat in a paused node's socket, or a node clock stepped back,
// moves it back where it belongs at its next prompt attempt. No wall clock of a
// client is involved, so a client whose clock is off cannot jump the queue
// (one a minute behind took the lock turn after turn while others timed
// out); and a node that first sees a waiter late (it was hung, or lost its
// queue) puts it about where it started waiting. Each node orders by
// its own clock, so two waiters that arrive within a few milliseconds of
// each other may stand in different orders on different nodes: docs/design.md
// says why that is acceptable. Unlock takes the holder out,
// then promises the lock to the first waiter still seen within STALE ms: it
// sets NEXT to that waiter for a short while and publishes its id. While
// NEXT names someone else, the node refuses every acquisition. Promises
// only ever refuse more, so they cannot break mutual exclusion; they
// expire, so they cannot block for long.
//
// The script defining them must set NEXT, QUEUE and SEEN (keys) and WAITER
// (empty for no waiter), STALE (ms) and WAITED (ms) first.
const queueLua = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function promisedToOther()
  local n = redis.call('GET', NEXT)
  return n and n ~= WAITER
end
local function enqueue()
  if WAITER == '' then return end
  local now = nowMs()
  local place = now - WAITED
  local had = redis.call('ZSCORE', QUEUE, WAITER)
  if not had or tonumber(had) > place then redis.call('ZADD', QUEUE, place, WAITER) end
  redis.call('ZADD', SEEN, now, WAITER)
  redis.call('PEXPIRE', QUEUE, 4 * STALE)
  redis.call('PEXPIRE', SEEN, 4 * STALE)
end
`

// acquireScript sets the lock unless this value was already released here,
// or the lock is promised to another waiter.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value,
//	KEYS[3..5] the queue: promise NEXT, QUEUE, SEEN
//	ARGV[1] value,    ARGV[2] TTL in ms, ARGV[3] waiter id (empty: none),
//	ARGV[4] STALE in ms, ARGV[5] WAITED in ms
//
// Returns 1 if the node now holds the value, 0 if another owner holds the
// key or it is promised to another waiter, and a WRONGTYPE error if the key
// is not a string.
//
// The release marker exists because a call that timed out may still be
// sitting in a paused node's socket buffer: when the node resumes it would set
// the lock for a fresh TTL after the release had already run.
const acquireScript = `
local NEXT, QUEUE, SEEN = KEYS[3], KEYS[4], KEYS[5]
local WAITER, STALE, WAITED = ARGV[3], tonumber(ARGV[4]), math.max(0, tonumber(ARGV[5]) or 0)
` + queueLua + `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if promisedToOther() then enqueue() return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  return redis.error_reply('WRONGTYPE lock key holds a non-string value')
end
if v == ARGV[1] then return 1 end
enqueue()
return 0
`

// releaseScript deletes the lock if it still holds this value.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value,
//	KEYS[3..5] the queue: promise NEXT, QUEUE, SEEN
//	ARGV[1] value,    ARGV[2] marker TTL in ms, or 0 for no marker
//	ARGV[3] 1 to announce the release, 0 not to
//	ARGV[4] the holder's waiter id (empty: none);  ARGV[5] STALE in ms
//	ARGV[6] how long the promise to the next waiter lasts, in ms
//
// Returns 1 if it deleted the lock, 0 if the key held something else. When
// the value is absent and ARGV[2] is not 0, it leaves the release marker, so
// a SET of this value still in flight cannot land afterwards.
//
// An announced release (Unlock) takes the holder out of the queue and,
// where the lock is now free, promises it to the first waiter seen within
// STALE ms, dropping those not seen for longer. It publishes that waiter's
// id on "<lock key>:promised:<client id>", the channel of the waiter's
// client only (a waiter id is "<client id>/<n>"); if nobody waits, it
// publishes "" on "<lock key>:released", which every waiting client
// hears. Nodes where the lock was already gone promise it too, so that
// every node promises it to its first waiter (the same one on every node
// unless two waiters arrived there within moments of each other). Where nobody is queued and
// nothing is promised, it publishes nothing: every waiter refused by this
// node is in its queue. Notifications are a hint (waiters fall back to
// their retry delay), so a PUBLISH that fails, say because an ACL denies
// the channel, does not fail the release.
const releaseScript = `
local NEXT, QUEUE, SEEN = KEYS[3], KEYS[4], KEYS[5]
local STALE = tonumber(ARGV[5])
local v = redis.pcall('GET', KEYS[1])
local deleted = 0
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  deleted = 1
elseif ARGV[2] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
end
if ARGV[3] ~= '1' then return deleted end
-- Unlock: the holder leaves the queue on every node, and every node where
-- the lock is now free promises it to its first waiter.
if ARGV[4] ~= '' then
  redis.call('ZREM', QUEUE, ARGV[4])
  redis.call('ZREM', SEEN, ARGV[4])
end
if deleted == 0 and v then return 0 end
-- Nobody waits here and nothing is promised: nothing to hand over.
if redis.call('EXISTS', QUEUE, NEXT) == 0 then return deleted end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next = ''
for _ = 1, 16 do
  local first = redis.call('ZRANGE', QUEUE, 0, 0)
  if #first == 0 then break end
  local seen = tonumber(redis.call('ZSCORE', SEEN, first[1]) or '0')
  if now - seen <= STALE then
    next = first[1]
    break
  end
  redis.call('ZREM', QUEUE, first[1])
  redis.call('ZREM', SEEN, first[1])
end
if next == '' then
  redis.call('DEL', NEXT)
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
  return deleted
end
redis.call('SET', NEXT, next, 'PX', ARGV[6])
-- Only the promised waiter needs to wake, and only its client listens on
-- its own channel: telling every client cost each of them a read per node.
local client = string.match(next, '^(.*)/')
if client then
  redis.pcall('PUBLISH', KEYS[1] .. ':promised:' .. client, next)
else
  redis.pcall('PUBLISH', KEYS[1] .. ':released', next)
end
return deleted
`

// leaveScript takes a waiter that gave up out of the queue. If the lock was
// promised to it, the promise is withdrawn and the others are told.
//
//	KEYS[1] lock key, KEYS[2..4] promise NEXT, QUEUE, SEEN
//	ARGV[1] waiter id
const leaveScript = `
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
end
return 1
`

// extendScript re-applies the TTL where the key still holds this value. It
// never creates the key: an expired lock stays expired.
//
//	KEYS[1] lock key
//	ARGV[1] value, ARGV[2] TTL in ms
const extendScript = `
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`

var (
	acquireLua = newScript(acquireScript)
	releaseLua = newScript(releaseScript)
	leaveLua   = newScript(leaveScript)
	extendLua  = newScript(extendScript)
)

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
