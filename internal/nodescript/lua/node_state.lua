-- Reads what a node holds of its fencing identity and counters, for
-- Provision, Repair and doctor. Like every fenced script it first checks
-- the node (the identity prelude), so a node that is not intact is stamped
-- as such even if no acquisition reached it yet.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   KEYS[4] recorded replication id   KEYS[5] lost stamp
--   KEYS[6] G   KEYS[7] longest TTL used
--   ARGV[1] a fresh nonce, for the stamp (identity prelude)
--
-- Returns, as strings ('' for none): uuid, roster, id, recorded
-- replication id, current replication id, lost stamp ('<node ms>:<nonce>:<replid>'), node time
-- (ms), uptime (s), G, longest TTL (ms), run id, used memory, maxmemory,
-- replication role ('master' or 'slave'), and a replica's master as
-- 'host:port' ('' for a master).
nodeID()
local function get(k) return redis.call('GET', k) or '' end
local repl = redis.call('INFO', 'replication')
local server = redis.call('INFO', 'server')
local memory = redis.call('INFO', 'memory')
local t = redis.call('TIME')
local master = ''
if string.match(repl, 'role:slave') then
  master = (string.match(repl, 'master_host:([^\r\n]+)') or '?') .. ':' ..
    (string.match(repl, 'master_port:(%d+)') or '?')
end
return {
  get(KEYS[1]), get(KEYS[2]), get(KEYS[3]), get(KEYS[4]),
  string.match(repl, 'master_replid:(%x+)') or '',
  get(KEYS[5]),
  tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)),
  string.match(server, 'uptime_in_seconds:(%d+)') or '0',
  get(KEYS[6]), get(KEYS[7]),
  string.match(server, 'run_id:(%x+)') or '',
  string.match(memory, 'used_memory:(%d+)') or '0',
  string.match(memory, 'maxmemory:(%d+)') or '0',
  string.match(repl, 'role:(%a+)') or '',
  master,
}
