package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgateway/idemgateway/pgstore"
	"github.com/idemgateway/idemgateway/record"
)

// The PostgreSQL store (docs/stores.md#postgresql): IDEMGATEWAY_POSTGRES_URL, a postgres:// URL
// or key=value connection string as pgx reads it (pool settings included: pool_max_conns, …),
// and IDEMGATEWAY_POSTGRES_SCHEMA (default idemgateway).

// postgresStartTimeout bounds connecting and migrating the schema at start.
const postgresStartTimeout = 30 * time.Second

// checkPostgres validates the PostgreSQL settings that need no network. It never puts the URL,
// which may hold a password, in an error.
func (s *settings) checkPostgres() error {
	if s.PostgresURL == "" {
		return nil
	}
	if s.RedisURL != "" || len(s.RedisAddrs) > 0 {
		return errors.New("set one store: IDEMGATEWAY_POSTGRES_URL or a Redis setting, not both")
	}
	if _, err := pgstore.ParseConfig(s.PostgresURL); err != nil {
		return fmt.Errorf("IDEMGATEWAY_POSTGRES_URL: %w", err) // pgx hides the password
	}
	if s.PostgresSchema == "" {
		return errors.New("IDEMGATEWAY_POSTGRES_SCHEMA is empty: leave it unset for idemgateway, or name a schema")
	}
	return nil
}

// openPostgresStore connects to PostgreSQL, creates or migrates the schema, and warns when
// synchronous_commit is off (an acknowledged commit, a receipt, may then be lost in a crash).
func (s *settings) openPostgresStore(log *slog.Logger) (record.Store, func(), error) {
	cfg, err := pgstore.ParseConfig(s.PostgresURL)
	if err != nil {
		return nil, nil, fmt.Errorf("IDEMGATEWAY_POSTGRES_URL: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresStartTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	st, err := pgstore.New(ctx, pool, pgstore.Options{Schema: s.PostgresSchema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	if sc, err := st.SynchronousCommit(ctx); err == nil && sc == "off" {
		log.Warn("PostgreSQL's synchronous_commit is off: a receipt the gateway answered may be lost in a crash of the database, and its retry execute again; set it on for the gateway's user or database")
	}
	return st, func() {
		_ = st.Close()
		pool.Close()
	}, nil
}

// postgresRedacted is the URL with its password hidden, for the settings' String.
func postgresRedacted(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return "[redacted]"
}
