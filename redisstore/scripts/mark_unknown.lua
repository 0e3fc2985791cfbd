-- mark_unknown: ARGV owner, settle, ttl_ms, channel. Returns 1 when marked, else 0.
-- The in_progress record owned by owner becomes outcome_unknown with settle beside the claim's
-- payload, and PEXPIRE ttl from now; the owner is kept so that a later reclaim can name it as from.
-- So does one that a claim found lapsed (outcome_unknown, no settle part) while owner still holds
-- it: the mark adds why (record.Store.MarkUnknown).
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.owner ~= ARGV[1] then
  return 0
end
if rec.state == 'outcome_unknown' and rec.settle == ARGV[2] and ARGV[2] ~= '' then
  -- This very mark, sent again after its answer was lost (docs/guarantees.md#lost-replies).
  return 1
end
if rec.state ~= 'in_progress' and not lapsed_under(rec, ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'outcome_unknown', 'settle', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
-- Wake the duplicates that wait for this record (concurrency: wait), if any may.
notify(rec, ARGV[4], 'outcome_unknown')
return 1
