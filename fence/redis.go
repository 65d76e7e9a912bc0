package fence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/redis/go-redis/v9"
)

// fenceScript admits a token and, in the same atomic step, applies one
// operation to the protected data.
//
//	KEYS[1] the resource's fence (a hash: highest, holder)
//	KEYS[2] the data key, or the fence again when there is no operation
//	ARGV[1] token, ARGV[2] holder ('' if unknown)
//	ARGV[3] operation: '' (admit only), 'set', 'hset' or 'get'; or, as a
//	        read-write lock's reader (ReadFence), 'read' (admit only) or 'rget'
//	ARGV[4..] its arguments: set: value, PX ms ('0' for none); hset: field, value, ...
//
// A write is checked against both marks (highest, and rhighest, the
// readers'), a read against the write mark only; each raises its own.
// Returns {status, highest, found, value}: status 1 admitted, 0 stale,
// -1 reused (value is then the stored holder); highest is the mark that
// refused it.
//
// Tokens are compared as decimal strings, digit by digit, never as Lua
// numbers: those are doubles, which take 2^53 and 2^53+1 for one number.
// The stored mark is checked to be such a string first. The operation runs
// before the mark is raised, through pcall: if Redis refuses it (a key of
// another type, a bad argument, maxmemory), the script returns the error
// having written nothing. Redis scripts do not roll back, so the order is
// what keeps a failed operation from leaving a raised mark.
const fenceScript = `
local function less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local h = redis.call('HMGET', KEYS[1], 'highest', 'holder', 'rhighest', 'rholder')
local t, op = ARGV[1], ARGV[3]
local reading = op == 'read' or op == 'rget'
-- check returns the refusal of t by a mark (highest, its holder), if any.
local function check(highest, stored)
  if highest and not string.match(highest, '^[1-9]%d*$') then
    return redis.error_reply('fence: the mark at ' .. KEYS[1] .. ' is not a token: ' .. string.sub(highest, 1, 40))
  end
  highest, stored = highest or '0', stored or ''
  if less(t, highest) then return {0, highest, 0, ''} end
  if t == highest and ARGV[2] ~= '' and stored ~= '' and stored ~= ARGV[2] then
    return {-1, highest, 1, stored}
  end
end
if reading and h[3] and not string.match(h[3], '^[1-9]%d*$') then
  return redis.error_reply('fence: the read mark at ' .. KEYS[1] .. ' is not a token: ' .. string.sub(h[3], 1, 40))
end
local refusal = check(h[1], h[2]) or (not reading and check(h[3], h[4]))
if refusal then return refusal end
local r = nil
if op == 'set' then
  if ARGV[5] ~= '0' then
    r = redis.pcall('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  else
    r = redis.pcall('SET', KEYS[2], ARGV[4])
  end
elseif op == 'hset' then
  -- In slices: unpack returns a few thousand values at most. Only the first
  -- can be refused: it makes the key a hash, and once a script has written,
  -- Redis no longer refuses its writes for maxmemory.
  for i = 4, #ARGV, 1000 do
    r = redis.pcall('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
    if type(r) == 'table' and r.err then break end
  end
elseif op == 'get' or op == 'rget' then
  r = redis.pcall('GET', KEYS[2])
end
if type(r) == 'table' and r.err then return r end
-- A write raises the write mark, a read the read mark: to its token when
-- that is higher, or to fill in a holder it did not know.
local raised, hk, sk = h[1], 'highest', 'holder'
local known = h[2]
if reading then raised, hk, sk, known = h[3], 'rhighest', 'rholder', h[4] end
raised = raised or '0'
if less(raised, t) or (t == raised and (known or '') == '') then
  redis.call('HSET', KEYS[1], hk, t, sk, ARGV[2])
end
if (op == 'get' or op == 'rget') and r then return {1, t, 1, r} end
return {1, t, 0, ''}
`

// fenceLua asks the server for its digest (luascript): redis.NewScript
// hashes in Go, which panics under GODEBUG=fips140=only.
var fenceLua = luascript.New(fenceScript)

// MaxRedisToken is the largest token Redis admits: 2^53-1. Larger tokens
// are refused with ErrTokenRange. The script would compare them exactly,
// but the mark is data that other readers of the store (Highest, a JSON
// client, another Lua script) take as a number, and below 2^53 every one of
// them reads it exactly. The lock client's tokens stay below 2^53.
const MaxRedisToken = 1<<53 - 1

// Redis is a Fence kept in the protected service's own Redis, with fenced
// reads and writes of data stored beside it: the check and the operation
// run as one Lua script.
//
// The fence of a resource lives at "<prefix>:{<resource>}". On a Redis
// Cluster, give data keys the same hash tag ("{<resource>}") so that the
// script can reach both. Tokens above MaxRedisToken are refused with
// ErrTokenRange.
type Redis struct {
	client redis.UniversalClient
	prefix string
}

var _ ReadFence = (*Redis)(nil)

// NewRedis returns a fence stored in client under prefix ("fence" if empty).
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = "fence"
	}
	return &Redis{client: client, prefix: prefix}
}

func (r *Redis) key(resource string) string { return r.prefix + ":{" + resource + "}" }

// isFenceKey reports whether key is the fence of some resource: every
// "<prefix>:{...}" is.
func (r *Redis) isFenceKey(key string) bool {
	rest, ok := strings.CutPrefix(key, r.prefix+":{")
	return ok && strings.HasSuffix(rest, "}")
}

// Admit implements Fence.
func (r *Redis) Admit(ctx context.Context, resource string, token uint64, holder string) error {
	_, _, err := r.run(ctx, resource, token, holder, r.key(resource), "")
	return err
}

// Set admits the token and sets key to value (with a TTL unless ttl is 0;
// a TTL is rounded up to whole milliseconds), atomically. A stale token
// writes nothing; nor does a SET that Redis refuses, which leaves the mark
// as it was. A negative ttl is refused with ErrBadTTL.
func (r *Redis) Set(ctx context.Context, resource string, token uint64, holder, key, value string, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: %v", ErrBadTTL, ttl)
	}
	ms := ttl / time.Millisecond
	if ttl%time.Millisecond != 0 {
		ms++ // 0 would mean no TTL at all
	}
	_, _, err := r.run(ctx, resource, token, holder, key, "set", value, int64(ms))
	return err
}

// HSet admits the token and sets the fields of the hash at key, atomically.
// If Redis refuses the write (key holds another type), nothing is written
// and the mark stays as it was. Without fields it returns ErrNoFields.
func (r *Redis) HSet(ctx context.Context, resource string, token uint64, holder, key string, fields map[string]string) error {
	if len(fields) == 0 {
		return ErrNoFields
	}
	args := make([]any, 0, 2*len(fields))
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		args = append(args, f, fields[f])
	}
	_, _, err := r.run(ctx, resource, token, holder, key, "hset", args...)
	return err
}

// Get admits the token and reads key, atomically: the read of a
// read-modify-write. It returns redis.Nil if key does not exist. If the
// read fails (key holds another type), the mark stays as it was.
func (r *Redis) Get(ctx context.Context, resource string, token uint64, holder, key string) (string, error) {
	v, found, err := r.run(ctx, resource, token, holder, key, "get")
	if err == nil && !found {
		err = redis.Nil
	}
	return v, err
}

// AdmitRead implements ReadFence.
func (r *Redis) AdmitRead(ctx context.Context, resource string, token uint64, holder string) error {
	_, _, err := r.run(ctx, resource, token, holder, r.key(resource), "read")
	return err
}

// GetRead admits a read's token (ReadFence) and reads key, atomically: a
// fenced read under a read-write lock's read hold. It returns redis.Nil if
// key does not exist.
func (r *Redis) GetRead(ctx context.Context, resource string, token uint64, holder, key string) (string, error) {
	v, found, err := r.run(ctx, resource, token, holder, key, "rget")
	if err == nil && !found {
		err = redis.Nil
	}
	return v, err
}

// Highest returns the highest token admitted for resource (0 if none).
func (r *Redis) Highest(ctx context.Context, resource string) (uint64, error) {
	s, err := r.client.HGet(ctx, r.key(resource), "highest").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

// run checks in Go all it can before anything is sent, so that a refusal
// costs no round trip and the script sees only well-formed tokens.
func (r *Redis) run(ctx context.Context, resource string, token uint64, holder, key, op string, args ...any) (string, bool, error) {
	if err := validate(resource, token); err != nil {
		return "", false, err
	}
	if token > MaxRedisToken {
		return "", false, fmt.Errorf("%w: %d is above 2^53-1", ErrTokenRange, token)
	}
	if op != "" && op != "read" && r.isFenceKey(key) {
		return "", false, fmt.Errorf("%w: %q", ErrFenceKey, key)
	}
	argv := append([]any{strconv.FormatUint(token, 10), holder, op}, args...)
	res, err := fenceLua.Run(ctx, r.client, []string{r.key(resource), key}, argv...).Slice()
	if err != nil {
		return "", false, fmt.Errorf("fence: %q: %w", resource, err)
	}
	if len(res) != 4 {
		return "", false, fmt.Errorf("fence: unexpected reply %v", res)
	}
	status, _ := res[0].(int64)
	highest, _ := strconv.ParseUint(fmt.Sprint(res[1]), 10, 64)
	found, _ := res[2].(int64)
	value, _ := res[3].(string)
	switch status {
	case 0:
		return "", false, &StaleTokenError{Resource: resource, Token: token, Highest: highest}
	case -1:
		return "", false, &ReusedTokenError{Resource: resource, Token: token, Holder: holder, StoredHolder: value}
	}
	return value, found == 1, nil
}
