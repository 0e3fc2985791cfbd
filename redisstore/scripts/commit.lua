-- commit: ARGV owner, settle, ttl_ms, channel. Returns 1 when committed, else 0.
-- The in_progress record owned by owner becomes committed with settle beside the claim's payload,
-- which stays, and PEXPIRE ttl from now; the owner is kept (harmless: only reclaim reads it, and it
-- refuses committed records).
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.state ~= 'in_progress' or rec.owner ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'committed', 'settle', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
-- Wake the duplicates that wait for this record (concurrency: wait); a hint, not a guarantee.
redis.call('PUBLISH', ARGV[4], 'committed')
return 1
