-- settle: ARGV owner, settle, ttl_ms, channel, state. Returns 1 when settled, else 0.
-- The in_progress record owned by owner becomes state (committed or outcome_unknown) with settle
-- beside the claim's payload, which stays, and PEXPIRE ttl from now (ttl 0: the expiry the claim
-- set stays). The owner is kept: a reclaim of an outcome_unknown record names it as from, and
-- reclaim refuses committed records.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.owner ~= ARGV[1] then
  return 0
end
if rec.state == ARGV[5] and rec.settle == ARGV[2] and ARGV[2] ~= '' then
  -- This very settle, sent again after its answer was lost (docs/guarantees.md#lost-replies).
  return 1
end
-- The owner of a record a claim found lapsed (outcome_unknown, no settle part), which nobody took
-- over, may still settle it: a late receipt is stored, a mark adds why (docs/guarantees.md).
if rec.state ~= 'in_progress' and not lapsed_under(rec, ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[5], 'settle', ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
-- Wake the duplicates that wait for this record (concurrency: wait), if any may.
notify(rec, ARGV[4], ARGV[5])
return 1
