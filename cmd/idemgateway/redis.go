package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// The three Redis topologies, chosen by the settings:
//
//	IDEMGATEWAY_REDIS_URL                            one Redis (redis:// or rediss://)
//	IDEMGATEWAY_REDIS_ADDRS + IDEMGATEWAY_REDIS_MASTER  Sentinel: sentinel addresses and master name
//	IDEMGATEWAY_REDIS_ADDRS                          Redis Cluster: seed addresses (one is enough)

// checkRedis validates the Redis settings that need no file or network: conflicts and ranges. It
// never puts a secret in an error.
func (s *settings) checkRedis() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	sentinel := s.RedisMaster != ""
	switch {
	case s.RedisURL != "" && len(s.RedisAddrs) > 0:
		add("set IDEMGATEWAY_REDIS_URL (one Redis) or IDEMGATEWAY_REDIS_ADDRS (Cluster or Sentinel), not both")
	case sentinel && len(s.RedisAddrs) == 0:
		add("IDEMGATEWAY_REDIS_MASTER needs the sentinel addresses in IDEMGATEWAY_REDIS_ADDRS")
	}
	if !sentinel && (s.RedisSentinelUsername != "" || s.RedisSentinelPassword != "") {
		add("IDEMGATEWAY_REDIS_SENTINEL_USERNAME and _PASSWORD are for Sentinel only: set IDEMGATEWAY_REDIS_MASTER")
	}
	if s.RedisURL != "" && s.RedisTLS && !strings.HasPrefix(s.RedisURL, "rediss://") {
		add("IDEMGATEWAY_REDIS_TLS is true but IDEMGATEWAY_REDIS_URL is not a rediss:// URL: use rediss://")
	}
	if s.RedisPoolSize < 0 {
		add("IDEMGATEWAY_REDIS_POOL_SIZE %d is negative", s.RedisPoolSize)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"IDEMGATEWAY_REDIS_DIAL_TIMEOUT", s.RedisDialTimeout}, {"IDEMGATEWAY_REDIS_READ_TIMEOUT", s.RedisReadTimeout},
		{"IDEMGATEWAY_REDIS_WRITE_TIMEOUT", s.RedisWriteTimeout}, {"IDEMGATEWAY_REDIS_WAIT_TIMEOUT", s.RedisWaitTimeout},
		{"IDEMGATEWAY_REDIS_CHECK_INTERVAL", s.RedisCheckInterval},
	} {
		if d.value <= 0 {
			add("%s %s is not positive", d.name, d.value)
		}
	}
	if s.RedisWaitReplicas < 0 {
		add("IDEMGATEWAY_REDIS_WAIT_REPLICAS %d is negative", s.RedisWaitReplicas)
	}
	if s.RedisWaitReplicas > 0 && (s.RedisWaitTimeout >= s.RedisReadTimeout || s.RedisWaitTimeout >= gateway.DefaultStoreTimeout) {
		add("IDEMGATEWAY_REDIS_WAIT_TIMEOUT %s must be shorter than IDEMGATEWAY_REDIS_READ_TIMEOUT (%s) and the gateway's store timeout (%s)",
			s.RedisWaitTimeout, s.RedisReadTimeout, gateway.DefaultStoreTimeout)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// openRedisStore opens the Redis store on the client of redisClient. Commits that fewer replicas
// acknowledged than IDEMGATEWAY_REDIS_WAIT_REPLICAS are logged as warnings, and so is each change
// the store's safety check finds (logSafety). The first check starts at once, in the background:
// a Redis that cannot be reached, or could evict records, is said in the log at start, not at the
// first keyed request.
func (s *settings) openRedisStore(log *slog.Logger) (record.Store, func(), error) {
	client, err := s.redisClient()
	if err != nil {
		return nil, nil, err
	}
	st, err := redisstore.New(client, redisstore.Options{
		AllowEviction:  s.RedisAllowEviction,
		AutoPipeline:   s.RedisAutoPipeline,
		CheckInterval:  s.RedisCheckInterval,
		OnSafetyChange: func(err error) { logSafety(log, err) },
		WaitReplicas:   s.RedisWaitReplicas,
		WaitTimeout:    s.RedisWaitTimeout,
		OnUnreplicated: func(ctx context.Context, u redisstore.Unreplicated) {
			log.WarnContext(ctx, "record write not confirmed by enough Redis replicas; it stands on the primary but a failover may lose it",
				"op", u.Op, "key", u.Key, "acked", u.Acked, "want", u.Want, "err", u.Err)
		},
	})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	go func() { _ = st.Safe() }()
	return st, func() { _ = st.Close() }, nil
}

// The messages of logSafety, one per verdict of the Redis store's safety check.
const (
	msgStoreUnsafe    = "the Redis store is unfit to keep records: keyed requests get 503 store-unavailable, without a claim or an upstream call, until a check passes"
	msgWritesRefused  = "Redis refuses writes: new keys get 503 store-unavailable, committed keys still replay, until a check passes"
	msgStoreSafeAgain = "the Redis store is fit to keep records again: keyed requests are served"
)

// logSafety logs a change of the Redis store's safety verdict (redisstore.Store.Safe), once per
// change. A recovery is a warning too, so that an operator who reads only warnings sees it end.
func logSafety(log *slog.Logger, err error) {
	switch {
	case err == nil:
		log.Warn(msgStoreSafeAgain)
	case errors.Is(err, record.ErrWritesRefused):
		log.Warn(msgWritesRefused, "err", err)
	default:
		log.Warn(msgStoreUnsafe, "err", err)
	}
}

// redisMaxRetries is how many times go-redis sends a command again after a failure that its rules
// deem retryable: a connection that broke (EOF, reset) before or after Redis ran the command, a
// dial that failed, a node loading, read-only or failing over (LOADING, READONLY, MASTERDOWN,
// CLUSTERDOWN, TRYAGAIN). A store script's copy that finds its first run's effect answers as the
// first did, so these retries are safe (docs/guarantees.md#lost-replies), and they turn a dropped
// connection into the answer rather than a 503. It is go-redis's default, set here so that it is a
// decision, not an accident, and it overrides max_retries in the URL.
//
// Every retry stays within the store call that made it: the client runs with
// ContextTimeoutEnabled, so each call, its retries and their backoff included, ends at the
// gateway's store timeout (2 s). A reply that does not come is therefore not sent again by go-redis
// unless IDEMGATEWAY_REDIS_READ_TIMEOUT is shorter than that (its default, 3 s, is longer, so that
// a slow Redis is not sent copies of what it is still working on); the call fails, and the
// gateway's own answer applies (docs/guarantees.md#lost-replies).
const redisMaxRetries = 3

// redisClient builds the go-redis client of the configured topology. Errors name settings, never
// their values, since the URL may hold a password.
func (s *settings) redisClient() (redis.UniversalClient, error) {
	tlsConfig, err := s.redisTLS()
	if err != nil {
		return nil, err
	}
	switch {
	case s.RedisURL != "":
		opt, err := redis.ParseURL(s.RedisURL)
		if err != nil {
			return nil, errors.New("IDEMGATEWAY_REDIS_URL is not a valid redis:// or rediss:// URL")
		}
		// The URL's user name and password win; the settings fill in what it leaves out.
		if opt.Password != "" && s.RedisPassword != "" {
			return nil, errors.New("IDEMGATEWAY_REDIS_URL holds a password and IDEMGATEWAY_REDIS_PASSWORD is set: set it in one place")
		}
		if opt.Username != "" && s.RedisUsername != "" && opt.Username != s.RedisUsername {
			return nil, errors.New("IDEMGATEWAY_REDIS_URL and IDEMGATEWAY_REDIS_USERNAME name different users")
		}
		if opt.Username == "" {
			opt.Username = s.RedisUsername
		}
		if opt.Password == "" {
			opt.Password = s.RedisPassword
		}
		if opt.TLSConfig != nil && tlsConfig != nil {
			opt.TLSConfig.RootCAs = tlsConfig.RootCAs
		}
		opt.PoolSize = s.RedisPoolSize
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = s.RedisDialTimeout, s.RedisReadTimeout, s.RedisWriteTimeout
		opt.MaxRetries = redisMaxRetries
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), nil
	default:
		// Sentinel when a master name is set; else Cluster, even for a single seed address (it
		// learns the other nodes from it; go-redis would take one address for a single node).
		return redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs:                 s.RedisAddrs,
			MasterName:            s.RedisMaster,
			IsClusterMode:         s.RedisMaster == "",
			SentinelUsername:      s.RedisSentinelUsername,
			SentinelPassword:      s.RedisSentinelPassword,
			Username:              s.RedisUsername,
			Password:              s.RedisPassword,
			TLSConfig:             tlsConfig,
			PoolSize:              s.RedisPoolSize,
			DialTimeout:           s.RedisDialTimeout,
			ReadTimeout:           s.RedisReadTimeout,
			WriteTimeout:          s.RedisWriteTimeout,
			MaxRetries:            redisMaxRetries,
			ContextTimeoutEnabled: true,
		}), nil
	}
}

// redisTLS returns the TLS configuration of IDEMGATEWAY_REDIS_TLS (or a rediss:// URL) and
// IDEMGATEWAY_REDIS_TLS_CA_FILE: TLS 1.2 or later, the server's certificate verified against the
// system's roots plus the CA file's certificates, and the server name taken from each address
// dialled. It returns nil when TLS is off.
func (s *settings) redisTLS() (*tls.Config, error) {
	if !s.RedisTLS && !strings.HasPrefix(s.RedisURL, "rediss://") {
		if s.RedisTLSCAFile != "" {
			return nil, errors.New("IDEMGATEWAY_REDIS_TLS_CA_FILE is set but TLS is off: set IDEMGATEWAY_REDIS_TLS=true or use a rediss:// URL")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.RedisTLSCAFile != "" {
		pem, err := os.ReadFile(s.RedisTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("IDEMGATEWAY_REDIS_TLS_CA_FILE: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("IDEMGATEWAY_REDIS_TLS_CA_FILE %s holds no PEM certificate", s.RedisTLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
