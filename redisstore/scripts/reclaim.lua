-- reclaim: ARGV from, owner, payload, lease_ms, ttl_ms. Returns 1 when taken over, else 0.
-- Only a record owned by from that is outcome_unknown, or in_progress with a lapsed lease, becomes
-- in_progress for owner with payload and no settle, lease from now and PEXPIRE ttl.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec then
  return 0
end
local now = now_ms()
if rec.state == 'in_progress' and rec.owner == ARGV[2] and rec.payload == ARGV[3] then
  -- Taken over by this very reclaim, sent again after its answer was lost
  -- (docs/guarantees.md#lost-replies): the lease from now, as if the first had come now.
  redis.call('HSET', KEYS[1], 'lease_until', ms(now + tonumber(ARGV[4])))
  return 1
end
if rec.owner ~= ARGV[1] then
  return 0
end
if rec.state == 'outcome_unknown' or (rec.state == 'in_progress' and now >= rec.lease_until) then
  redis.call('HSET', KEYS[1], 'state', 'in_progress', 'owner', ARGV[2],
    'lease_until', ms(now + tonumber(ARGV[4])), 'payload', ARGV[3], 'settle', '')
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
