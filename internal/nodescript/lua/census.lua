-- Which of a semaphore's slots are held on this node (read only): for each
-- KEYS[i], a slot's lock key, 1 if it exists, else 0.
local held = {}
for i = 1, #KEYS do held[i] = redis.call('EXISTS', KEYS[i]) end
return held
