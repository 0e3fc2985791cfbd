-- get: no ARGV. Returns {} when there is no record, else {state, payload}; read-only.
-- A script rather than HMGET so that a corrupt record is refused exactly as the writers refuse it.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec then
  return {}
end
return {rec.state, rec.payload}
