// Package redisstore is the Redis implementation of gateway.Store, for gateways that run as several
// replicas sharing one Redis (standalone, Sentinel or Cluster).
//
// # Data layout
//
// A record is one hash at <Prefix>{<key>}, where key is the gateway's opaque key with "%" and "}"
// escaped as "%25" and "%7D". The escaping makes the hash tag (the part between the first "{" and
// the next "}") exactly the whole key, whatever characters the key holds, and it is injective, so two
// keys never share a hash. The hash has four fields:
//
//	state        in_progress | committed | outcome_unknown
//	owner        the owner token of the last Claim or Reclaim
//	lease_until  end of the owner's lease, Redis server time (TIME) in milliseconds since the Unix epoch
//	payload      the gateway's bytes, kept byte for byte
//
// The key's own expiry (PEXPIRE) is the record's TTL; Redis removes expired records itself.
//
// # Scripts and round trips
//
// Every transition (claim-or-read, reclaim, renew, commit, mark-unknown, release) and Get is one Lua
// script run with EVALSHA, falling back to EVAL (which loads the script) when the server does not
// know it yet; Delete is one DEL. So a Claim, a replay and a Commit each cost one round trip, except
// the first use of each script per Redis server, which costs two. Lease deadlines use the server's
// clock (TIME), so gateway replicas with skewed clocks agree. Each script touches only its record's
// key, so the store works on Redis Cluster. A key that holds a hash which is not a valid record
// (missing or unknown fields) is refused with an error wrapping ErrCorrupt, never overwritten or freed;
// Delete removes it.
//
// The scripts need Redis 5 or later (script effects replication by default; tested with 7.0).
//
// # Durability
//
// Records are as durable as the Redis deployment makes them: run Redis with appendonly yes (and
// appendfsync always when a lost second of claims after a crash is not acceptable), and with
// maxmemory-policy noeviction, which Ping checks. Redis replication is asynchronous, so a failover can
// lose the last acknowledged writes; the store does not use WAIT.
package redisstore
