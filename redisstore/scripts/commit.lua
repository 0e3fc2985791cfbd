-- commit: ARGV owner, settle, ttl_ms, channel. Returns 1 when committed, else 0.
-- The in_progress record owned by owner becomes committed with settle beside the claim's payload,
-- which stays, and PEXPIRE ttl from now (ttl 0: the expiry the claim set stays); the owner is kept (harmless: only reclaim reads it, and it
-- refuses committed records).
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.owner ~= ARGV[1] then
  return 0
end
if rec.state == 'committed' and rec.settle == ARGV[2] and ARGV[2] ~= '' then
  -- This very commit, sent again after its answer was lost (docs/guarantees.md#lost-replies).
  return 1
end
-- The owner of a record a claim found lapsed, which nobody took over, may still store its receipt
-- (docs/guarantees.md).
if rec.state ~= 'in_progress' and not lapsed_under(rec, ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'committed', 'settle', ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
-- Wake the duplicates that wait for this record (concurrency: wait), if any may.
notify(rec, ARGV[4], 'committed')
return 1
