-- A waiter gives up (leaveScript in queue.go).
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
end
return 1
