-- record.lua is prepended to every script (see scripts.go). KEYS[1] is the record's hash, with the
-- fields state, owner, lease_until (Redis server time, milliseconds since the Unix epoch), payload
-- (the claim's part of the record's payload), settle (the part that commit or mark_unknown
-- wrote; absent, or empty, until then) and watched ('1' once a claim of another owner found the
-- record in progress: a duplicate may be waiting for its settle notice; absent until then).
-- docs/stores.md shows the layout.

-- now_ms returns the server's clock (TIME) in milliseconds since the Unix epoch. Redis replicates a
-- script's effects, not the script, so reading TIME before writing is allowed and replicas agree.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- ms formats a number of milliseconds as an integer string (tostring could give 1.7e+12).
local function ms(n)
  return string.format('%.0f', n)
end

-- record_of checks the fields of a record hash (nil where absent) and returns the record as a
-- table, or nil and an error message when they are not a valid record.
local function record_of(state, owner, lease_until, payload, settle, watched)
  if not state then
    return nil, 'CORRUPT hash has no state field'
  end
  if state ~= 'in_progress' and state ~= 'committed' and state ~= 'outcome_unknown' then
    return nil, 'CORRUPT unknown state'
  end
  lease_until = tonumber(lease_until or '')
  if not owner or not lease_until or not payload then
    return nil, 'CORRUPT missing or invalid owner, lease_until or payload field'
  end
  return {state = state, owner = owner, lease_until = lease_until, payload = payload, settle = settle or '',
    watched = watched ~= nil}
end

-- load_by_fields is load for a user without +hgetall: HMGET, and EXISTS when there is no state.
local function load_by_fields(key)
  local f = redis.call('HMGET', key, 'state', 'owner', 'lease_until', 'payload', 'settle', 'watched')
  if not f[1] and redis.call('EXISTS', key) == 0 then
    return nil
  end
  return record_of(f[1] or nil, f[2] or nil, f[3] or nil, f[4] or nil, f[5] or nil, f[6] or nil)
end

-- load returns nil when there is no record at key, the record as a table otherwise, or nil and an
-- error message when the key holds a hash that is not a valid record: scripts then refuse with an
-- error instead of overwriting or freeing a record they do not understand. A key of another type
-- makes the read fail with WRONGTYPE, which also aborts the script. A record without settle (one
-- written before the payload was split, or not settled yet) has settle ''.
--
-- One HGETALL reads the record and tells a missing key (no fields) from a foreign hash (no state):
-- a claim of a new key runs one command less than with HMGET and EXISTS. A user of the
-- least-privilege ACL of earlier builds lacks +hgetall; Redis refuses the command, the script
-- catches it and reads as those builds did, so an upgrade does not break it
-- (docs/deploy.md#tls-and-acl).
local function load(key)
  local f = redis.pcall('HGETALL', key)
  if f.err then
    return load_by_fields(key) -- WRONGTYPE fails there again, uncaught
  end
  if #f == 0 then
    return nil
  end
  local h = {}
  for i = 1, #f, 2 do
    h[f[i]] = f[i + 1]
  end
  return record_of(h.state, h.owner, h.lease_until, h.payload, h.settle, h.watched)
end

-- lapsed_under reports whether rec is outcome_unknown because a claim found the lease of owner
-- lapsed (it has no settle part), owner still holding it: nobody took it over, and that owner may
-- still commit, mark or release it (record.Store; boltstore's lapsedUnder).
local function lapsed_under(rec, owner)
  return rec.state == 'outcome_unknown' and rec.owner == owner and rec.settle == ''
end

-- notify publishes a settle notice (commit, mark_unknown, release) on channel when a duplicate may
-- be waiting for it: only a claim that found rec in progress under another owner marks it watched
-- (claim.lua), and a duplicate claims again after it subscribes, so a settle after that claim is
-- announced to it. A settle nobody watched sends nothing: one command less per first execution.
-- Notices are hints; the waiters' poll is the safety net (docs/stores.md#redis, "Settle notices").
local function notify(rec, channel, what)
  if rec.watched then
    redis.call('PUBLISH', channel, what)
  end
end
