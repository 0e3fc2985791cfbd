package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/kelseyhightower/envconfig"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/redisstore"
)

// settings are the process settings of contract §1.
type settings struct {
	Routes             string   `default:"routes.yaml"`
	Listen             string   `default:":8080"`
	AdminListen        string   `default:"127.0.0.1:9090" split_words:"true"`
	AdminToken         string   `split_words:"true"`
	RedisURL           string   `split_words:"true"`
	RedisAddrs         []string `split_words:"true"`
	RedisMaster        string   `split_words:"true"`
	RedisAllowEviction bool     `split_words:"true"`
	DataDir            string   `default:"./data" split_words:"true"`
	LogLevel           string   `default:"info" split_words:"true"`
	LogFormat          string   `default:"json" split_words:"true"`
}

// loadSettings reads IDEMGATEWAY_* variables, then the flags of the same names in args.
func loadSettings(args []string) (*settings, error) {
	s := new(settings)
	if err := envconfig.Process("idemgateway", s); err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("idemgateway", flag.ContinueOnError)
	fs.StringVar(&s.Routes, "routes", s.Routes, "path of the routes file (IDEMGATEWAY_ROUTES)")
	fs.StringVar(&s.Listen, "listen", s.Listen, "proxy listener (IDEMGATEWAY_LISTEN)")
	fs.StringVar(&s.AdminListen, "admin-listen", s.AdminListen, "admin listener (IDEMGATEWAY_ADMIN_LISTEN)")
	fs.StringVar(&s.RedisURL, "redis-url", s.RedisURL, "redis:// or rediss:// URL of a single Redis (IDEMGATEWAY_REDIS_URL)")
	fs.StringVar(&s.DataDir, "data-dir", s.DataDir, "directory of the embedded store (IDEMGATEWAY_DATA_DIR)")
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
		return nil, fmt.Errorf("IDEMGATEWAY_ADMIN_LISTEN: %w", err)
	}
	if ip := net.ParseIP(host); s.AdminToken == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("IDEMGATEWAY_ADMIN_LISTEN %q is not a loopback address: set IDEMGATEWAY_ADMIN_TOKEN", s.AdminListen)
	}
	return s, nil
}

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

func (s *settings) storeName() string {
	switch {
	case s.RedisURL != "":
		return "redis"
	case len(s.RedisAddrs) > 0 && s.RedisMaster != "":
		return "redis-sentinel"
	case len(s.RedisAddrs) > 0:
		return "redis-cluster"
	}
	return "embedded:" + s.DataDir
}

// openStore opens the Redis store when a Redis setting is given, else the embedded store.
func (s *settings) openStore(log *slog.Logger) (gateway.Store, func(), error) {
	var client redis.UniversalClient
	switch {
	case s.RedisURL != "":
		opt, err := redis.ParseURL(s.RedisURL)
		if err != nil {
			// The URL may hold a password: name the setting, not the value.
			return nil, nil, errors.New("IDEMGATEWAY_REDIS_URL is not a valid redis:// or rediss:// URL")
		}
		client = redis.NewClient(opt)
	case len(s.RedisAddrs) > 0:
		client = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: s.RedisAddrs, MasterName: s.RedisMaster})
	default:
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
	st, err := redisstore.New(client, redisstore.Options{AllowEviction: s.RedisAllowEviction})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return st, func() { _ = st.Close() }, nil
}
