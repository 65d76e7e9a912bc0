package fence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// fenceScript admits a token and, in the same atomic step, applies one
// operation to the protected data.
//
//	KEYS[1] the resource's fence (a hash: highest, holder)
//	KEYS[2] the data key, or the fence again when there is no operation
//	ARGV[1] token, ARGV[2] holder ('' if unknown)
//	ARGV[3] operation: '' (admit only), 'set', 'hset' or 'get'
//	ARGV[4..] its arguments: set: value, PX ms ('0' for none); hset: field, value, ...
//
// Returns {status, highest, found, value}: status 1 admitted, 0 stale,
// -1 reused (value is then the stored holder).
const fenceScript = `
local h = redis.call('HMGET', KEYS[1], 'highest', 'holder')
local highest = tonumber(h[1] or '0')
local stored = h[2] or ''
local t = tonumber(ARGV[1])
if t < highest then return {0, h[1], 0, ''} end
if t == highest and ARGV[2] ~= '' and stored ~= '' and stored ~= ARGV[2] then
  return {-1, h[1], 1, stored}
end
if t > highest or stored == '' then
  redis.call('HSET', KEYS[1], 'highest', ARGV[1], 'holder', ARGV[2])
end
local op = ARGV[3]
if op == 'set' then
  if ARGV[5] ~= '0' then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  else
    redis.call('SET', KEYS[2], ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 4))
elseif op == 'get' then
  local v = redis.call('GET', KEYS[2])
  if v then return {1, ARGV[1], 1, v} end
end
return {1, ARGV[1], 0, ''}
`

var fenceLua = redis.NewScript(fenceScript)

// Redis is a Fence kept in the protected service's own Redis, with fenced
// reads and writes of data stored beside it: the check and the operation
// run as one Lua script.
//
// The fence of a resource lives at "<prefix>:{<resource>}". On a Redis
// Cluster, give data keys the same hash tag ("{<resource>}") so that the
// script can reach both.
type Redis struct {
	client redis.UniversalClient
	prefix string
}

var _ Fence = (*Redis)(nil)

// NewRedis returns a fence stored in client under prefix ("fence" if empty).
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = "fence"
	}
	return &Redis{client: client, prefix: prefix}
}

func (r *Redis) key(resource string) string { return r.prefix + ":{" + resource + "}" }

// Admit implements Fence.
func (r *Redis) Admit(ctx context.Context, resource string, token uint64, holder string) error {
	_, _, err := r.run(ctx, resource, token, holder, r.key(resource), "")
	return err
}

// Set admits the token and sets key to value (with a TTL unless ttl is 0),
// atomically. A stale token writes nothing.
func (r *Redis) Set(ctx context.Context, resource string, token uint64, holder, key, value string, ttl time.Duration) error {
	_, _, err := r.run(ctx, resource, token, holder, key, "set", value, ttl.Milliseconds())
	return err
}

// HSet admits the token and sets the fields of the hash at key, atomically.
func (r *Redis) HSet(ctx context.Context, resource string, token uint64, holder, key string, fields map[string]string) error {
	if len(fields) == 0 {
		return errors.New("fence: HSet with no fields")
	}
	args := make([]any, 0, 2*len(fields))
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		args = append(args, f, fields[f])
	}
	_, _, err := r.run(ctx, resource, token, holder, key, "hset", args...)
	return err
}

// Get admits the token and reads key, atomically: the read of a
// read-modify-write. It returns redis.Nil if key does not exist.
func (r *Redis) Get(ctx context.Context, resource string, token uint64, holder, key string) (string, error) {
	v, found, err := r.run(ctx, resource, token, holder, key, "get")
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

func (r *Redis) run(ctx context.Context, resource string, token uint64, holder, key, op string, args ...any) (string, bool, error) {
	if err := validate(resource, token); err != nil {
		return "", false, err
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
