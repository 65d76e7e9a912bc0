-- A waiter gives back a promise it could not use (yieldScript in queue.go).
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
end
return 1
