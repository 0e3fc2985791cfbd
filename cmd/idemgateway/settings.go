package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/record"
)

// settings are the process settings of docs/contract.md §1, plus the Redis connection settings of
// redis.go. String hides the secrets.
type settings struct {
	Routes             string   `default:"routes.yaml"`
	Listen             string   `default:":8080"`
	AdminListen        string   `default:"127.0.0.1:9090" split_words:"true"`
	AdminToken         string   `split_words:"true"` // secret
	RedisURL           string   `split_words:"true"` // secret: may hold a password
	RedisAddrs         []string `split_words:"true"`
	RedisMaster        string   `split_words:"true"`
	RedisAllowEviction bool     `split_words:"true"`
	PostgresURL        string   `split_words:"true"` // secret: may hold a password (postgres.go)
	PostgresSchema     string   `default:"idemgateway" split_words:"true"`
	DataDir            string   `default:"./data" split_words:"true"`
	LogLevel           string   `default:"info" split_words:"true"`
	LogFormat          string   `default:"json" split_words:"true"`
	EncryptionKey      string   `split_words:"true"` // secret: base64 of 32 bytes; encrypts payloads at rest
	// CompressMinBytes is the size from which a record's payload part is stored compressed
	// (record.Compressed); 0 compresses nothing, and parts compressed earlier still read
	// (IDEMGATEWAY_COMPRESS_MIN_BYTES).
	CompressMinBytes int `default:"4096" split_words:"true"`
	// RoutesPoll is how often the routes file's content is checked for a change; 0 turns the
	// checks off, so that only SIGHUP reloads (IDEMGATEWAY_ROUTES_POLL).
	RoutesPoll time.Duration `default:"2s" split_words:"true"`
	// ShutdownGrace is how long a shutdown waits for the calls in flight before it marks them
	// outcome_unknown; 0 means the longest upstream timeout plus 5 s, at least 5 s
	// (IDEMGATEWAY_SHUTDOWN_GRACE).
	ShutdownGrace time.Duration `split_words:"true"`

	// Limits of each connection to either listener (listeners.go, docs/security.md#deadlines):
	// IDEMGATEWAY_READ_HEADER_TIMEOUT, _BODY_TIMEOUT, _WRITE_TIMEOUT, _MIN_TRANSFER_RATE (bytes
	// per second), _MAX_HEADER_BYTES and _IDLE_TIMEOUT; each must be positive.
	ReadHeaderTimeout time.Duration `default:"10s" split_words:"true"`
	BodyTimeout       time.Duration `default:"10s" split_words:"true"`
	WriteTimeout      time.Duration `default:"10s" split_words:"true"`
	MinTransferRate   int64         `default:"4096" split_words:"true"`
	MaxHeaderBytes    int           `default:"65536" split_words:"true"`
	IdleTimeout       time.Duration `default:"2m" split_words:"true"`
	// Bounds of the work of a request's body (docs/security.md#resource-limits): the values a body
	// the gateway fingerprints may hold (IDEMGATEWAY_MAX_BODY_VALUES; more is a 413
	// body-too-complex), and the memory of the body parses under way, each weighed by its bound
	// (IDEMGATEWAY_MAX_INFLIGHT_BYTES, bytes; at least 1 MiB; 0, the default, is a share of the
	// memory limit: inflightBytes; a parse that finds no room in 2 s is a 503 overloaded).
	MaxBodyValues    int   `default:"100000" split_words:"true"`
	MaxInflightBytes int64 `split_words:"true"`
	// AdminHosts are the names, besides IP addresses, localhost and the admin listen address's
	// own name, under which the admin listener answers (IDEMGATEWAY_ADMIN_HOSTS, comma-separated).
	AdminHosts []string `split_words:"true"`

	// Redis connection settings (redis.go). Zero pool size means go-redis's default.
	RedisUsername         string        `split_words:"true"`
	RedisPassword         string        `split_words:"true"` // secret
	RedisSentinelUsername string        `split_words:"true"`
	RedisSentinelPassword string        `split_words:"true"` // secret
	RedisTLS              bool          `envconfig:"REDIS_TLS"`
	RedisTLSCAFile        string        `envconfig:"REDIS_TLS_CA_FILE"`
	RedisPoolSize         int           `split_words:"true"`
	RedisDialTimeout      time.Duration `default:"5s" split_words:"true"`
	RedisReadTimeout      time.Duration `default:"3s" split_words:"true"`
	RedisWriteTimeout     time.Duration `default:"3s" split_words:"true"`
	RedisWaitReplicas     int           `split_words:"true"`
	RedisWaitTimeout      time.Duration `default:"100ms" split_words:"true"`
	// RedisCheckInterval is how often the Redis store's safety check runs (redisstore.Options.CheckInterval).
	RedisCheckInterval time.Duration `default:"5s" split_words:"true"`
	// RedisAutoPipeline batches the scripts of concurrent requests (redisstore.Options.AutoPipeline).
	RedisAutoPipeline bool `split_words:"true"`
}

// loadSettings reads IDEMGATEWAY_* variables, then the flags of the same names in args.
func loadSettings(args []string) (*settings, error) {
	s := new(settings)
	if err := envconfig.Process("idemgateway", s); err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("idemgateway", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\nflags of serve and validate (each overrides its variable):\n", usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&s.Routes, "routes", s.Routes, "path of the routes file (IDEMGATEWAY_ROUTES)")
	fs.StringVar(&s.Listen, "listen", s.Listen, "proxy listener (IDEMGATEWAY_LISTEN)")
	fs.StringVar(&s.AdminListen, "admin-listen", s.AdminListen, "admin listener (IDEMGATEWAY_ADMIN_LISTEN)")
	fs.StringVar(&s.RedisURL, "redis-url", s.RedisURL, "redis:// or rediss:// URL of a single Redis (IDEMGATEWAY_REDIS_URL)")
	fs.StringVar(&s.DataDir, "data-dir", s.DataDir, "directory of the embedded store (IDEMGATEWAY_DATA_DIR)")
	fs.StringVar(&s.PostgresURL, "postgres-url", s.PostgresURL, "postgres:// URL of the PostgreSQL store (IDEMGATEWAY_POSTGRES_URL)")
	fs.StringVar(&s.PostgresSchema, "postgres-schema", s.PostgresSchema, "schema of the PostgreSQL store's tables (IDEMGATEWAY_POSTGRES_SCHEMA)")
	fs.StringVar(&s.LogLevel, "log-level", s.LogLevel, "debug, info, warn or error (IDEMGATEWAY_LOG_LEVEL)")
	fs.StringVar(&s.LogFormat, "log-format", s.LogFormat, "json or text (IDEMGATEWAY_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	host, _, err := net.SplitHostPort(s.AdminListen)
	if err != nil {
		return nil, fmt.Errorf("IDEMGATEWAY_ADMIN_LISTEN (-admin-listen): %w", err)
	}
	if ip := net.ParseIP(host); s.AdminToken == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("IDEMGATEWAY_ADMIN_LISTEN (-admin-listen) %q is not a loopback address: set IDEMGATEWAY_ADMIN_TOKEN", s.AdminListen)
	}
	if _, err := s.encryptionKey(); err != nil {
		return nil, err
	}
	if s.CompressMinBytes < 0 {
		return nil, fmt.Errorf("IDEMGATEWAY_COMPRESS_MIN_BYTES %d is negative: want a size in bytes, or 0 to compress nothing", s.CompressMinBytes)
	}
	if s.RoutesPoll < 0 {
		return nil, fmt.Errorf("IDEMGATEWAY_ROUTES_POLL %s is negative: want a duration, or 0 to reload on SIGHUP only", s.RoutesPoll)
	}
	if s.ShutdownGrace < 0 {
		return nil, fmt.Errorf("IDEMGATEWAY_SHUTDOWN_GRACE %s is negative: want a duration, or 0 for the default", s.ShutdownGrace)
	}
	if err := s.checkLimits(); err != nil {
		return nil, err
	}
	if err := s.checkRedis(); err != nil {
		return nil, err
	}
	if err := s.checkPostgres(); err != nil {
		return nil, err
	}
	return s, nil
}

// String returns the settings with every secret replaced by "[redacted]" (and the Redis URL's
// password by "xxxxx"), so that %v, %+v and %#v never print one.
func (s *settings) String() string {
	c := *s
	for _, secret := range []*string{&c.AdminToken, &c.RedisPassword, &c.RedisSentinelPassword, &c.EncryptionKey} {
		if *secret != "" {
			*secret = "[redacted]"
		}
	}
	if c.PostgresURL != "" {
		c.PostgresURL = postgresRedacted(s.PostgresURL)
	}
	if c.RedisURL != "" {
		c.RedisURL = "[redacted]"
		if u, err := url.Parse(s.RedisURL); err == nil {
			c.RedisURL = u.Redacted()
		}
	}
	type plain settings // without the String method
	return fmt.Sprintf("%+v", plain(c))
}

// GoString is String, for %#v.
func (s *settings) GoString() string { return s.String() }

func (s *settings) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return nil, fmt.Errorf("IDEMGATEWAY_LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch s.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("IDEMGATEWAY_LOG_FORMAT %q: want json or text", s.LogFormat)
}

// storeName names the store for the log, with where it is and never a secret:
// "postgres:<schema>", "redis:<host:port>" (of the URL; "redis" when it does not parse),
// "redis-sentinel:<master>@<addrs>", "redis-cluster:<addrs>" or "embedded:<data dir>".
func (s *settings) storeName() string {
	switch {
	case s.PostgresURL != "":
		return "postgres:" + s.PostgresSchema
	case s.RedisURL != "":
		if opt, err := redis.ParseURL(s.RedisURL); err == nil {
			return "redis:" + opt.Addr
		}
		return "redis"
	case len(s.RedisAddrs) > 0 && s.RedisMaster != "":
		return "redis-sentinel:" + s.RedisMaster + "@" + strings.Join(s.RedisAddrs, ",")
	case len(s.RedisAddrs) > 0:
		return "redis-cluster:" + strings.Join(s.RedisAddrs, ",")
	}
	return "embedded:" + s.DataDir
}

// encryptionKey decodes IDEMGATEWAY_ENCRYPTION_KEY: nil when unset. The error never shows it.
func (s *settings) encryptionKey() ([]byte, error) {
	if s.EncryptionKey == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(s.EncryptionKey)
	if err != nil || len(key) != 32 {
		return nil, errors.New("IDEMGATEWAY_ENCRYPTION_KEY: want the base64 of 32 random bytes (openssl rand -base64 32)")
	}
	return key, nil
}

// openStore opens the store the settings name and wraps it so that payloads are compressed
// (record.Compressed) and, with IDEMGATEWAY_ENCRYPTION_KEY, encrypted at rest (record.Encrypted):
// compressed first, as ciphertext does not compress.
func (s *settings) openStore(log *slog.Logger) (record.Store, func(), error) {
	st, closeStore, err := s.openBaseStore(log)
	if err != nil {
		return nil, nil, err
	}
	if key, _ := s.encryptionKey(); key != nil { // checked by loadSettings
		if st, err = record.Encrypted(st, key); err != nil {
			closeStore()
			return nil, nil, err
		}
	}
	return record.Compressed(st, s.CompressMinBytes), closeStore, nil
}

func (s *settings) openBaseStore(log *slog.Logger) (record.Store, func(), error) {
	if s.PostgresURL != "" {
		return s.openPostgresStore(log)
	}
	if s.RedisURL != "" || len(s.RedisAddrs) > 0 {
		return s.openRedisStore(log)
	}
	st, err := boltstore.Open(s.DataDir, boltstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	return st, func() {
		if err := st.Close(); err != nil {
			log.Error("closing the embedded store", "err", err)
		}
	}, nil
}
