package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, each run once, in order, in one transaction with the
// version it reaches. Version 1: the records table (the key as bytes: any byte, NUL too, and
// compared bytewise for the pages of ListUnknown; the payload parts as sent, NULL for nil), a
// partial index of the outcome_unknown rows (ListUnknown reads the index, never a scan) and an
// index of expiries (the sweep). Version 2: rows are kept whole in the table up to a page
// (toast_tuple_target 8160 bytes) instead of compressed, and moved to the TOAST table, past 2 KB:
// the record of a 1 KiB request and answer is about 2.6 KB, and compressing it and writing it out
// of line cost a first execution 6–14 % of its throughput, and a replay the TOAST table's reads
// (pgbench, docs/stores.md#postgresql). {s} is the schema.
var migrations = []string{
	`CREATE TABLE {s}.records (
	key         bytea PRIMARY KEY,
	state       text NOT NULL,
	owner       text NOT NULL,
	lease_until timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	claim       bytea,
	settle      bytea,
	watched     boolean NOT NULL DEFAULT false
);
CREATE INDEX records_unknown ON {s}.records (key) WHERE state = 'outcome_unknown';
CREATE INDEX records_expires ON {s}.records (expires_at);`,
	`ALTER TABLE {s}.records SET (toast_tuple_target = 8160);`,
}

// SchemaVersion is the version of the schema this build migrates to.
var SchemaVersion = len(migrations)

// migrate creates schema and its tables, or brings them to SchemaVersion, under a transaction
// advisory lock so that gateways starting together migrate once. A schema newer than this build
// is refused: its rows may hold what this build would misread.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('idemgateway schema ' || $1))`, schema); err != nil {
			return err
		}
		// A schema created beforehand needs no CREATE on the database (docs/deploy.md).
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+schema+`.schema_version (version integer NOT NULL)`); err != nil {
			return err
		}
		var version int
		switch err := tx.QueryRow(ctx, `SELECT version FROM `+schema+`.schema_version`).Scan(&version); {
		case err == pgx.ErrNoRows:
			if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.schema_version VALUES (0)`); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("schema %s is at version %d, newer than this build's %d: run a newer build, or another schema", schema, version, SchemaVersion)
		}
		for v := version; v < SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, replaceSchema(migrations[v], schema)); err != nil {
				return fmt.Errorf("migration %d: %w", v+1, err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE `+schema+`.schema_version SET version = $1`, SchemaVersion)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: creating or migrating schema %s: %w", schema, err)
	}
	return nil
}

func replaceSchema(sql, schema string) string { return strings.ReplaceAll(sql, "{s}", schema) }
