-- get: no ARGV. Returns {} when there is no record, else {state, payload, settle}; read-only.
-- A script rather than HMGET so that a corrupt record is refused exactly as the writers refuse it.
local rec, err = load(KEYS[1])
if err then
  return redis.error_reply(err)
end
if not rec then
  return {}
end
-- An in_progress record whose lease lapsed is reported outcome_unknown (claim stores it so).
if rec.state == 'in_progress' and now_ms() >= rec.lease_until then
  return {'outcome_unknown', rec.payload, rec.settle}
end
return {rec.state, rec.payload, rec.settle}
