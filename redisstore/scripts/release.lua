-- release: ARGV owner, channel. Returns 1 when released, or when there is no record, else 0.
-- Deletes the in_progress record owned by owner, so that a retry executes again; also one that a
-- claim found lapsed (outcome_unknown, no settle part) while owner still holds it: the owner knows
-- its call did not commit, and nobody took the record over (record.Store.Release). A record that is
-- gone already (this very release, sent again after its answer was lost; its TTL; an operator's
-- delete) leaves a retry free to execute again all the same: 1 (docs/guarantees.md#lost-replies).
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec then
  return 1
end
if rec.owner ~= ARGV[1] or (rec.state ~= 'in_progress' and not lapsed_under(rec, ARGV[1])) then
  return 0
end
redis.call('DEL', KEYS[1])
-- Wake the duplicates that wait for this record (concurrency: wait), if any may.
notify(rec, ARGV[2], 'released')
return 1
