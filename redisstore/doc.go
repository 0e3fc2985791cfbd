// Package redisstore is the Redis implementation of record.Store, for gateways that run as several
// replicas sharing one Redis (standalone, Sentinel or Cluster).
//
// # Data layout
//
// A record is one hash at <Prefix>{<key>}, where key is the gateway's opaque key with "%" and "}"
// escaped as "%25" and "%7D". The escaping makes the hash tag (the part between the first "{" and
// the next "}") exactly the whole key, whatever characters the key holds, and it is injective, so two
// keys never share a hash. The hash has these fields:
//
//	state        in_progress | committed | outcome_unknown
//	owner        the owner token of the last Claim or Reclaim
//	lease_until  end of the owner's lease, Redis server time (TIME) in milliseconds since the Unix epoch
//	payload      the claim part of the gateway's bytes (record.Payload.Claim), byte for byte
//	settle       the settle part (record.Payload.Settle) that Commit or MarkUnknown wrote, byte for
//	             byte; absent until then, and empty after a Reclaim
//
// The key's own expiry (PEXPIRE) is the record's TTL; Redis removes expired records itself. Records
// written before the payload was split have no settle field: their payload is all of it.
//
// # Scripts and round trips
//
// Every transition (claim-or-read, reclaim, renew, commit, mark-unknown, release) and Get is one Lua
// script run with EVALSHA, falling back to EVAL (which loads the script) when the server does not
// know it yet; Delete is one DEL. So a Claim, a replay and a Commit each cost one round trip, except
// the first use of each script per Redis server, which costs two. Lease deadlines use the server's
// clock (TIME), so gateway replicas with skewed clocks agree. Each script touches only its record's
// key, so the store works on Redis Cluster. A key that holds a hash which is not a valid record
// (missing or unknown fields) is refused with an error wrapping record.ErrCorrupt, never
// overwritten or freed; Delete removes it.
//
// In all, the scripts call HGETALL, HSET, PEXPIRE, TIME, DEL and PUBLISH, which a least-privilege
// ACL user must be allowed (ACLs apply inside scripts too); adding a command to them breaks every
// such user that lacks it, so the scripts keep to these. A user set up for an earlier build has
// HMGET and EXISTS where this one needs HGETALL: the scripts catch Redis's refusal of HGETALL and
// read the record with HMGET, then EXISTS when it has no state field, as those builds did.
//
// The scripts need Redis 5 or later (script effects replication by default; tested with 7.0).
//
// # Settle notices
//
// The commit, mark-unknown and release scripts PUBLISH a notice on <Prefix>settled:{<key>} (the key
// escaped as above) when the record is marked watched: a claim of another owner (a duplicate, which
// may wait for the settle) found it in progress and set its field watched. A duplicate claims
// again after it subscribes, so a settle after that claim is announced to it; a first execution
// that no duplicate saw publishes nothing (docs/stores.md#redis). WatchSettled (record.SettleNotifier) subscribes the Store's one Pub/Sub
// connection, opened on the first watch, to the channels of the keys that duplicates of this
// process wait for (concurrency: wait), only while they wait: SUBSCRIBE and UNSUBSCRIBE, never a
// pattern, so that a process hears of those keys' settles and of no other. A PUBLISH that nobody
// subscribes to costs Redis one lookup. On Redis Cluster, PUBLISH reaches the subscribers of every
// node, so the connection may be on any node. An ACL user needs +publish, +subscribe and
// +unsubscribe on &<Prefix>settled:*. Without +subscribe (a user set up for a version that used
// PSUBSCRIBE), Redis refuses every SUBSCRIBE, WatchSettled fails, and waiting duplicates are woken
// by a poll; the subscriptions end with their watches all the same.
//
// # Durability
//
// Records are as durable as the Redis deployment makes them: run Redis with appendonly yes (and
// appendfsync always when a lost second of claims after a crash is not acceptable), and with
// maxmemory-policy noeviction, which Ping checks.
//
// # Fail closed
//
// Safe (record.SafetyReporter) gives the gateway, before each claim and without a round trip, the
// verdict of the store's background safety check (safety.go): an evicting or unreadable
// maxmemory-policy, scripts refused, or Redis out of reach make keyed requests fail with 503
// before any claim; Redis out of memory lets claims through, since a claim of a committed record
// only reads it. The check runs every Options.CheckInterval, and at once after a script fails
// with OOM or NOPERM (docs/stores.md, "Fail closed").
//
// # Replication and WAIT
//
// Redis replicates asynchronously: the primary answers a write before any replica has it. When the
// primary dies, Sentinel or Cluster promotes a replica that may lack the last writes. A lost Commit
// leaves the record as the Claim wrote it: in_progress, then outcome_unknown once its lease lapses,
// so a retry is blocked (on_unknown_outcome: block) but not executed twice. A lost Claim leaves no
// record, so a retry executes again: a duplicate effect.
//
// Options.WaitReplicas = n > 0 makes Commit and MarkUnknown send WAIT n WaitTimeout right after
// their script, in the same pipeline, so on the same connection and in the same round trip; the
// call then lasts until n replicas have acknowledged the write, or WaitTimeout. (A script that
// Redis does not know yet costs a second round trip, EVAL and WAIT, as without WAIT.)
//
// What this guarantees: when Commit returns without calling Options.OnUnreplicated, n replicas held
// the receipt in memory when it returned; a failover that promotes one of them keeps it, and
// Sentinel and Cluster promote the most up-to-date replica they can reach. What it does not:
//
//   - WAIT makes nothing strongly consistent. A failover can still promote a replica that did not
//     acknowledge (with more replicas than n, or when the acknowledging ones are cut off too), and
//     the replicas keep the write in memory, not necessarily on disk.
//   - A write that too few replicas acknowledged is not undone: it stands on the primary, which
//     serves every replay from it, and the upstream has acted, so the receipt is the best record
//     there is. Commit and MarkUnknown therefore return ok == true and a nil error, exactly as
//     without WAIT, and call Options.OnUnreplicated with an Unreplicated that says how many
//     replicas acknowledged. The Store contract (record.Store) reserves errors for a store that
//     could not be asked; an error here would make the gateway report a receipt as not stored when
//     it is.
//   - Claim, Reclaim, Renew and Release do not wait, so a claim lost in a failover still lets a
//     retry execute a second time. Waiting on every claim would add the replicas' round trip to
//     every request, including replays.
//
// On Redis Cluster the pipeline is sent to the master that serves the record's slot (WAIT has no
// key, so the cluster client would send it to any node). If that node answers MOVED, ASK, TRYAGAIN
// or CLUSTERDOWN, it did not run the script; the store runs the script again through the cluster
// client, which follows the redirection, and reports the write with Unreplicated.Acked == -1,
// since WAIT can no longer be sent on the connection that wrote.
package redisstore
