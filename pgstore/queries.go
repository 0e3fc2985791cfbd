package pgstore

import "strings"

// The statements of the transitions, on the records table (schema.go), written {t}. Every statement compares
// times with now(), the database's clock, so gateways with skewed clocks agree; an expired row
// (expires_at <= now()) is never read as live. Durations are milliseconds, as bigint: a ttl of a
// year is more than an int4 holds.
type queries struct {
	read, insert, claimExpired, claimAgain, claimLapsed, watch string
	reclaim, renew, finish, release, get, list, delete         string
	ping, sweep                                                string
}

// unsettledBy is the guard of a settle: the record is owned by $2 and in_progress (its lease may
// have lapsed unobserved), or a Claim turned it outcome_unknown at a lapse (it has no settle).
const unsettledBy = `owner = $2 AND (state = 'in_progress' OR (state = 'outcome_unknown' AND coalesce(length(settle), 0) = 0))`

func newQueries(table string) queries {
	q := queries{
		// $1 key: the row there, as a claim decides on it. A replay is this statement alone: a read
		// costs PostgreSQL half of what an INSERT … ON CONFLICT that finds the row does. A settled
		// row's claim part is left out (NULL): a claim answers such a record with its settle part
		// alone (record.Store.Claim).
		read: `SELECT state, owner, CASE WHEN length(settle) > 0 THEN NULL ELSE claim END, settle, watched,
	expires_at <= now(), lease_until <= now() FROM {t} WHERE key = $1`,
		// $1 key, $2 owner, $3 payload, $4 lease, $5 ttl: a new record, unless a concurrent claim
		// inserted one meanwhile (then nothing, and the claim reads it).
		insert: `INSERT INTO {t} (key, state, owner, lease_until, expires_at, claim, watched)
VALUES ($1, 'in_progress', $2, now() + $4::bigint * interval '1 millisecond', now() + $5::bigint * interval '1 millisecond', $3, false)
ON CONFLICT (key) DO NOTHING`,
		claimExpired: `UPDATE {t} SET state = 'in_progress', owner = $2, lease_until = now() + $4::bigint * interval '1 millisecond',
	expires_at = now() + $5::bigint * interval '1 millisecond', claim = $3, settle = NULL, watched = false
WHERE key = $1 AND expires_at <= now()`,
		// $1 key, $2 owner, $3 payload, $4 lease: this very claim (or reclaim), sent again.
		claimAgain: `UPDATE {t} SET lease_until = now() + $4::bigint * interval '1 millisecond'
WHERE key = $1 AND expires_at > now() AND state = 'in_progress' AND owner = $2 AND claim IS NOT DISTINCT FROM $3`,
		// $1 key, $2 the owner whose lease lapsed.
		claimLapsed: `UPDATE {t} SET state = 'outcome_unknown'
WHERE key = $1 AND expires_at > now() AND state = 'in_progress' AND owner = $2 AND lease_until <= now()`,
		watch: `UPDATE {t} SET watched = true WHERE key = $1 AND state = 'in_progress' AND owner = $2 AND NOT watched`,
		// $1 key, $2 from, $3 owner, $4 payload, $5 lease, $6 ttl.
		reclaim: `UPDATE {t} SET state = 'in_progress', owner = $3, lease_until = now() + $5::bigint * interval '1 millisecond',
	expires_at = now() + $6::bigint * interval '1 millisecond', claim = $4, settle = NULL, watched = false
WHERE key = $1 AND expires_at > now() AND owner = $2 AND (state = 'outcome_unknown' OR (state = 'in_progress' AND lease_until <= now()))`,
		// $1 key, $2 owner, $3 lease.
		renew: `UPDATE {t} SET lease_until = now() + $3::bigint * interval '1 millisecond'
WHERE key = $1 AND expires_at > now() AND state = 'in_progress' AND owner = $2`,
		// $1 key, $2 owner, $3 state, $4 settle, $5 ttl (0: keep the expiry), $6 channel. The
		// same settle sent again changes nothing, its expiry still the first's.
		finish: `WITH u AS (
	UPDATE {t} SET state = $3, settle = $4,
		expires_at = CASE WHEN state = $3 AND settle = $4 THEN expires_at
			WHEN $5::bigint > 0 THEN now() + $5::bigint * interval '1 millisecond' ELSE expires_at END
	WHERE key = $1 AND expires_at > now() AND (` + unsettledBy + `
		OR (owner = $2 AND state = $3 AND settle = $4 AND length($4) > 0))
	RETURNING watched
), n AS (SELECT pg_notify($6, encode($1, 'hex')) FROM u WHERE watched)
SELECT (SELECT count(*) FROM u) + 0 * (SELECT count(*) FROM n)`,
		// $1 key, $2 owner, $3 channel. exists is read from the statement's snapshot: true for the
		// row it deletes too.
		release: `WITH d AS (
	DELETE FROM {t} WHERE key = $1 AND expires_at > now() AND ` + unsettledBy + `
	RETURNING watched
), n AS (SELECT pg_notify($3, encode($1, 'hex')) FROM d WHERE watched)
SELECT (SELECT count(*) FROM d) + 0 * (SELECT count(*) FROM n), EXISTS (SELECT 1 FROM {t} WHERE key = $1 AND expires_at > now())`,
		get: `SELECT state, state = 'in_progress' AND lease_until <= now(), claim, settle FROM {t} WHERE key = $1 AND expires_at > now()`,
		// $1 prefix, $2 cursor, $3 limit. Keys compare bytewise (bytea).
		list: `SELECT key, claim, settle FROM {t}
WHERE state = 'outcome_unknown' AND key >= $1 AND substr(key, 1, length($1)) = $1 AND key > $2 AND expires_at > now()
ORDER BY key LIMIT $3`,
		delete: `DELETE FROM {t} WHERE key = $1 RETURNING expires_at > now()`,
		ping:   `SELECT 1 FROM {t} LIMIT 0`,
		// Deletes up to 1000 expired rows.
		sweep: `DELETE FROM {t} WHERE key = ANY (ARRAY (SELECT key FROM {t} WHERE expires_at <= now() LIMIT 1000))
	AND expires_at <= now()`,
	}
	for _, p := range []*string{&q.read, &q.insert, &q.claimExpired, &q.claimAgain, &q.claimLapsed, &q.watch, &q.reclaim, &q.renew,
		&q.finish, &q.release, &q.get, &q.list, &q.delete, &q.ping, &q.sweep} {
		*p = strings.ReplaceAll(*p, "{t}", table)
	}
	return q
}
