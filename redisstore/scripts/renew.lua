-- renew: ARGV owner, lease_ms. Returns 1 when renewed, else 0.
-- Sets lease_until of the in_progress record owned by owner to now + lease; the TTL is unchanged.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec or rec.state ~= 'in_progress' or rec.owner ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_until', ms(now_ms() + tonumber(ARGV[2])))
return 1
