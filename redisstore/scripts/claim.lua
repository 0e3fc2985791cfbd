-- claim: ARGV owner, payload, lease_ms, ttl_ms. Returns {claimed, state[, payload, settle[, lapsed]]}.
-- No record: create it in_progress for owner, lease from now, PEXPIRE ttl; return {1, 'in_progress'}
-- (the caller already has the payload). A record: return it as {0, state, payload, settle}, first
-- turning an in_progress record whose lease has lapsed into outcome_unknown (never freeing it), and
-- marking one whose lease holds watched. A settled record's payload is returned as '': its settle
-- part holds all a replay serves (record.Store.Claim), and a request of another effect reads the
-- claim part with get.lua.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec then
  redis.call('HSET', KEYS[1], 'state', 'in_progress', 'owner', ARGV[1],
    'lease_until', ms(now_ms() + tonumber(ARGV[3])), 'payload', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, 'in_progress'}
end
if rec.state == 'in_progress' then
  local now = now_ms()
  if rec.owner == ARGV[1] and rec.payload == ARGV[2] then
    -- This very claim, sent again after its answer was lost (docs/guarantees.md#lost-replies): it
    -- is claimed, with the lease from now, as if the first had come now.
    redis.call('HSET', KEYS[1], 'lease_until', ms(now + tonumber(ARGV[3])))
    return {1, 'in_progress'}
  end
  if now >= rec.lease_until then
    redis.call('HSET', KEYS[1], 'state', 'outcome_unknown')
    return {0, 'outcome_unknown', rec.payload, rec.settle, 1} -- 1: the caller indexes it (another slot on Cluster)
  end
  if not rec.watched then
    -- A duplicate: it may wait for the settle (concurrency: wait), so the settle must PUBLISH
    -- (record.lua's notify). pcall: a Redis out of memory refuses the write, and the duplicate
    -- must still learn that the record is in progress; its waiters then find the settle at their
    -- next poll (notices are hints).
    redis.pcall('HSET', KEYS[1], 'watched', '1')
  end
end
if rec.settle ~= '' then
  return {0, rec.state, '', rec.settle}
end
return {0, rec.state, rec.payload, ''}
