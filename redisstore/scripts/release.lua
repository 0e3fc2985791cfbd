-- release: ARGV owner, channel. Returns 1 when released, else 0.
-- Deletes the in_progress record owned by owner, so that a retry executes again.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.state ~= 'in_progress' or rec.owner ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
-- Wake the duplicates that wait for this record (concurrency: wait); a hint, not a guarantee.
redis.call('PUBLISH', ARGV[2], 'released')
return 1
