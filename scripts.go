package redlock

import "github.com/redis/go-redis/v9"

// The Lua the nodes run. Every key a script touches is passed in KEYS and
// shares the lock's hash tag, so a Redis Cluster can serve as one node.
// go-redis runs them with EVALSHA and falls back to EVAL on NOSCRIPT.

// acquireScript sets the lock unless this value was already released here.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value
//	ARGV[1] value,    ARGV[2] TTL in ms
//
// Returns 1 if the node now holds the value, 0 if another owner holds the
// key, and a WRONGTYPE error if the key is not a string.
//
// The release marker exists because a call that timed out may still be
// sitting in a paused node's socket buffer: when the node resumes it would set
// the lock for a fresh TTL after the release had already run.
const acquireScript = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  return redis.error_reply('WRONGTYPE lock key holds a non-string value')
end
if v == ARGV[1] then return 1 end
return 0
`

// releaseScript deletes the lock if it still holds this value.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value
//	ARGV[1] value,    ARGV[2] marker TTL in ms, or 0 for no marker
//
// Returns 1 if it deleted the lock, 0 if the key held something else. When
// the value is absent and ARGV[2] is not 0, it leaves the release marker, so
// a SET of this value still in flight cannot land afterwards.
const releaseScript = `
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if ARGV[2] ~= '0' then redis.call('SET', KEYS[2], '1', 'PX', ARGV[2]) end
return 0
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
	acquireLua = redis.NewScript(acquireScript)
	releaseLua = redis.NewScript(releaseScript)
	extendLua  = redis.NewScript(extendScript)
)
