package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/fixtures"
	"github.com/idemgateway/idemgateway/record"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/server"
)

func TestLoadSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(*settings) bool
		wantErr string
	}{
		{name: "defaults", check: func(s *settings) bool {
			return s.Routes == "routes.yaml" && s.Listen == ":8080" && s.AdminListen == "127.0.0.1:9090" &&
				s.DataDir == "./data" && s.LogLevel == "info" && s.LogFormat == "json" && !s.RedisAllowEviction &&
				s.RoutesPoll == 2*time.Second && s.ShutdownGrace == 0 && s.CompressMinBytes == record.DefaultCompressMinBytes
		}},
		{name: "routes poll off", env: map[string]string{"IDEMGATEWAY_ROUTES_POLL": "0"},
			check: func(s *settings) bool { return s.RoutesPoll == 0 }},
		{name: "routes poll", env: map[string]string{"IDEMGATEWAY_ROUTES_POLL": "250ms"},
			check: func(s *settings) bool { return s.RoutesPoll == 250*time.Millisecond }},
		{name: "shutdown grace", env: map[string]string{"IDEMGATEWAY_SHUTDOWN_GRACE": "1s"},
			check: func(s *settings) bool { return s.ShutdownGrace == time.Second }},
		{name: "negative shutdown grace", env: map[string]string{"IDEMGATEWAY_SHUTDOWN_GRACE": "-1s"},
			wantErr: "IDEMGATEWAY_SHUTDOWN_GRACE -1s is negative"},
		{name: "negative routes poll", env: map[string]string{"IDEMGATEWAY_ROUTES_POLL": "-1s"},
			wantErr: "IDEMGATEWAY_ROUTES_POLL -1s is negative"},
		{name: "environment", env: map[string]string{"IDEMGATEWAY_ROUTES": "r.yaml", "IDEMGATEWAY_REDIS_ADDRS": "a:1,b:2", "IDEMGATEWAY_REDIS_ALLOW_EVICTION": "true"},
			check: func(s *settings) bool {
				return s.Routes == "r.yaml" && len(s.RedisAddrs) == 2 && s.RedisAllowEviction
			}},
		{name: "a flag overrides the environment", env: map[string]string{"IDEMGATEWAY_LISTEN": ":1"}, args: []string{"-listen", ":2"},
			check: func(s *settings) bool { return s.Listen == ":2" }},
		{name: "public admin listener without a token", env: map[string]string{"IDEMGATEWAY_ADMIN_LISTEN": "0.0.0.0:9090"},
			wantErr: "not a loopback address: set IDEMGATEWAY_ADMIN_TOKEN"},
		{name: "public admin listener with a token", env: map[string]string{"IDEMGATEWAY_ADMIN_LISTEN": ":9090", "IDEMGATEWAY_ADMIN_TOKEN": "s3cret"},
			check: func(s *settings) bool { return s.AdminToken == "s3cret" }},
		{name: "localhost admin listener", env: map[string]string{"IDEMGATEWAY_ADMIN_LISTEN": "localhost:9090"},
			check: func(s *settings) bool { return s.AdminListen == "localhost:9090" }},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments: extra"},
		{name: "encryption key", env: map[string]string{"IDEMGATEWAY_ENCRYPTION_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
			check: func(s *settings) bool {
				k, err := s.encryptionKey()
				return err == nil && len(k) == 32 && !strings.Contains(s.String(), s.EncryptionKey)
			}},
		{name: "compression threshold", env: map[string]string{"IDEMGATEWAY_COMPRESS_MIN_BYTES": "0"},
			check: func(s *settings) bool { return s.CompressMinBytes == 0 }},
		{name: "negative compression threshold", env: map[string]string{"IDEMGATEWAY_COMPRESS_MIN_BYTES": "-1"},
			wantErr: "IDEMGATEWAY_COMPRESS_MIN_BYTES -1 is negative"},
		{name: "short encryption key", env: map[string]string{"IDEMGATEWAY_ENCRYPTION_KEY": "c2hvcnQ="},
			wantErr: "IDEMGATEWAY_ENCRYPTION_KEY: want the base64 of 32 random bytes"},
		{name: "redis defaults", check: func(s *settings) bool {
			return s.RedisPoolSize == 0 && s.RedisDialTimeout == 5*time.Second && s.RedisReadTimeout == 3*time.Second &&
				s.RedisWriteTimeout == 3*time.Second && s.RedisWaitReplicas == 0 && s.RedisWaitTimeout == 100*time.Millisecond &&
				!s.RedisTLS && s.RedisTLSCAFile == "" && s.RedisCheckInterval == 5*time.Second
		}},
		{name: "redis settings", env: map[string]string{
			"IDEMGATEWAY_REDIS_ADDRS": "s1:26379,s2:26379", "IDEMGATEWAY_REDIS_MASTER": "mymaster",
			"IDEMGATEWAY_REDIS_USERNAME": "gw", "IDEMGATEWAY_REDIS_PASSWORD": "pw",
			"IDEMGATEWAY_REDIS_SENTINEL_USERNAME": "sgw", "IDEMGATEWAY_REDIS_SENTINEL_PASSWORD": "spw",
			"IDEMGATEWAY_REDIS_TLS": "true", "IDEMGATEWAY_REDIS_TLS_CA_FILE": "/ca.pem", "IDEMGATEWAY_REDIS_POOL_SIZE": "7",
			"IDEMGATEWAY_REDIS_DIAL_TIMEOUT": "1s", "IDEMGATEWAY_REDIS_READ_TIMEOUT": "2s", "IDEMGATEWAY_REDIS_WRITE_TIMEOUT": "4s",
			"IDEMGATEWAY_REDIS_WAIT_REPLICAS": "2", "IDEMGATEWAY_REDIS_WAIT_TIMEOUT": "250ms"},
			check: func(s *settings) bool {
				return len(s.RedisAddrs) == 2 && s.RedisMaster == "mymaster" && s.RedisUsername == "gw" && s.RedisPassword == "pw" &&
					s.RedisSentinelUsername == "sgw" && s.RedisSentinelPassword == "spw" && s.RedisTLS && s.RedisTLSCAFile == "/ca.pem" &&
					s.RedisPoolSize == 7 && s.RedisDialTimeout == time.Second && s.RedisReadTimeout == 2*time.Second &&
					s.RedisWriteTimeout == 4*time.Second && s.RedisWaitReplicas == 2 && s.RedisWaitTimeout == 250*time.Millisecond
			}},
		{name: "url and addrs", env: map[string]string{"IDEMGATEWAY_REDIS_URL": "redis://r:6379", "IDEMGATEWAY_REDIS_ADDRS": "a:1"},
			wantErr: "set IDEMGATEWAY_REDIS_URL (one Redis) or IDEMGATEWAY_REDIS_ADDRS (Cluster or Sentinel), not both"},
		{name: "master without addrs", env: map[string]string{"IDEMGATEWAY_REDIS_MASTER": "m"},
			wantErr: "IDEMGATEWAY_REDIS_MASTER needs the sentinel addresses"},
		{name: "sentinel password without sentinel", env: map[string]string{"IDEMGATEWAY_REDIS_ADDRS": "a:1", "IDEMGATEWAY_REDIS_SENTINEL_PASSWORD": "x"},
			wantErr: "for Sentinel only"},
		{name: "tls with a redis:// url", env: map[string]string{"IDEMGATEWAY_REDIS_URL": "redis://r:6379", "IDEMGATEWAY_REDIS_TLS": "true"},
			wantErr: "use rediss://"},
		{name: "negative pool size", env: map[string]string{"IDEMGATEWAY_REDIS_POOL_SIZE": "-1"}, wantErr: "IDEMGATEWAY_REDIS_POOL_SIZE -1 is negative"},
		{name: "zero read timeout", env: map[string]string{"IDEMGATEWAY_REDIS_READ_TIMEOUT": "0s"}, wantErr: "IDEMGATEWAY_REDIS_READ_TIMEOUT 0s is not positive"},
		{name: "zero check interval", env: map[string]string{"IDEMGATEWAY_REDIS_CHECK_INTERVAL": "0s"}, wantErr: "IDEMGATEWAY_REDIS_CHECK_INTERVAL 0s is not positive"},
		{name: "check interval", env: map[string]string{"IDEMGATEWAY_REDIS_CHECK_INTERVAL": "250ms"},
			check: func(s *settings) bool { return s.RedisCheckInterval == 250*time.Millisecond }},
		{name: "negative wait replicas", env: map[string]string{"IDEMGATEWAY_REDIS_WAIT_REPLICAS": "-1"}, wantErr: "IDEMGATEWAY_REDIS_WAIT_REPLICAS -1 is negative"},
		{name: "wait timeout beyond the read timeout", env: map[string]string{"IDEMGATEWAY_REDIS_WAIT_REPLICAS": "1", "IDEMGATEWAY_REDIS_WAIT_TIMEOUT": "3s"},
			wantErr: "IDEMGATEWAY_REDIS_WAIT_TIMEOUT 3s must be shorter than IDEMGATEWAY_REDIS_READ_TIMEOUT (3s)"},
		{name: "wait timeout beyond the store timeout", env: map[string]string{"IDEMGATEWAY_REDIS_WAIT_REPLICAS": "1", "IDEMGATEWAY_REDIS_WAIT_TIMEOUT": "2s", "IDEMGATEWAY_REDIS_READ_TIMEOUT": "5s"},
			wantErr: "the gateway's store timeout (2s)"},
		{name: "long wait timeout without wait", env: map[string]string{"IDEMGATEWAY_REDIS_WAIT_TIMEOUT": "1m"},
			check: func(s *settings) bool { return s.RedisWaitTimeout == time.Minute }},
		{name: "connection limits by default", check: func(s *settings) bool {
			return s.limits() == server.Limits{ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 10 * time.Second,
				WriteTimeout: 10 * time.Second, MinRate: 4096, MaxHeaderBytes: 64 << 10, IdleTimeout: 2 * time.Minute} && len(s.AdminHosts) == 0
		}},
		{name: "connection limits", env: map[string]string{
			"IDEMGATEWAY_READ_HEADER_TIMEOUT": "1s", "IDEMGATEWAY_BODY_TIMEOUT": "2s", "IDEMGATEWAY_WRITE_TIMEOUT": "3s",
			"IDEMGATEWAY_MIN_TRANSFER_RATE": "100", "IDEMGATEWAY_MAX_HEADER_BYTES": "8192", "IDEMGATEWAY_IDLE_TIMEOUT": "4s",
			"IDEMGATEWAY_ADMIN_HOSTS": "gw-admin,gw-admin.ops.svc"},
			check: func(s *settings) bool {
				return s.limits() == server.Limits{ReadHeaderTimeout: time.Second, BodyTimeout: 2 * time.Second,
					WriteTimeout: 3 * time.Second, MinRate: 100, MaxHeaderBytes: 8192, IdleTimeout: 4 * time.Second} &&
					strings.Join(s.AdminHosts, " ") == "gw-admin gw-admin.ops.svc"
			}},
		{name: "connection limits not positive", env: map[string]string{"IDEMGATEWAY_BODY_TIMEOUT": "0s", "IDEMGATEWAY_MIN_TRANSFER_RATE": "-1"},
			wantErr: "IDEMGATEWAY_BODY_TIMEOUT 0s is not positive; IDEMGATEWAY_MIN_TRANSFER_RATE -1 is not positive"},
		{name: "body bounds by default", check: func(s *settings) bool {
			return s.MaxBodyValues == gateway.DefaultMaxBodyValues && s.MaxInflightBytes == 0 // from the memory limit
		}},
		{name: "body bounds", env: map[string]string{"IDEMGATEWAY_MAX_BODY_VALUES": "5000", "IDEMGATEWAY_MAX_INFLIGHT_BYTES": "1048576"},
			check: func(s *settings) bool { return s.MaxBodyValues == 5000 && s.MaxInflightBytes == 1<<20 }},
		{name: "body bounds too small", env: map[string]string{"IDEMGATEWAY_MAX_BODY_VALUES": "0", "IDEMGATEWAY_MAX_INFLIGHT_BYTES": "65536"},
			wantErr: "IDEMGATEWAY_MAX_BODY_VALUES 0 is not positive; IDEMGATEWAY_MAX_INFLIGHT_BYTES 65536 is under 1048576 (1 MiB): set at least 1 MiB, or 0 for a quarter of the memory limit"},
		{name: "parse budget negative", env: map[string]string{"IDEMGATEWAY_MAX_INFLIGHT_BYTES": "-1"},
			wantErr: "IDEMGATEWAY_MAX_INFLIGHT_BYTES -1 is under 1048576 (1 MiB): set at least 1 MiB, or 0 for a quarter of the memory limit"},
		{name: "admin host with a port", env: map[string]string{"IDEMGATEWAY_ADMIN_HOSTS": "gw-admin:9090"},
			wantErr: "IDEMGATEWAY_ADMIN_HOSTS: admin host \"gw-admin:9090\": want a host name without port"},
		{name: "every problem at once", env: map[string]string{"IDEMGATEWAY_REDIS_POOL_SIZE": "-1", "IDEMGATEWAY_REDIS_DIAL_TIMEOUT": "-1s"},
			wantErr: "IDEMGATEWAY_REDIS_POOL_SIZE -1 is negative; IDEMGATEWAY_REDIS_DIAL_TIMEOUT -1s is not positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			s, err := loadSettings(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(s) {
				t.Fatalf("loadSettings = %+v, %v", s, err)
			}
		})
	}
}

// TestRedisURLNeverInErrors: a Redis URL holds a password; an error names the setting only.
func TestRedisURLNeverInErrors(t *testing.T) {
	s := &settings{RedisURL: "redis://user:hunter2@[::1"}
	_, _, err := s.openStore(nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
	if s.storeName() != "redis" {
		t.Fatalf("storeName = %q", s.storeName())
	}
}

// TestStoreName: the start log names the store and where it is, never a credential.
func TestStoreName(t *testing.T) {
	for _, c := range []struct {
		s    settings
		want string
	}{
		{settings{RedisURL: "rediss://gw:s3cret@10.0.0.7:6380/2"}, "redis:10.0.0.7:6380"},
		{settings{RedisAddrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, RedisMaster: "mymaster", RedisPassword: "s3cret"}, "redis-sentinel:mymaster@10.0.0.1:26379,10.0.0.2:26379"},
		{settings{RedisAddrs: []string{"10.0.0.1:7000"}}, "redis-cluster:10.0.0.1:7000"},
		{settings{PostgresURL: "postgres://gw:s3cret@db/idem", PostgresSchema: "idemgateway"}, "postgres:idemgateway"},
		{settings{DataDir: "/var/lib/idemgateway"}, "embedded:/var/lib/idemgateway"},
	} {
		if got := c.s.storeName(); got != c.want {
			t.Errorf("storeName = %q, want %q", got, c.want)
		}
	}
}

// TestStoresCompressed: the store the command opens compresses a large part
// (IDEMGATEWAY_COMPRESS_MIN_BYTES, 4 KiB by default), encrypted or not, and stores it as it is
// with the setting 0, while still reading what was compressed before.
func TestStoresCompressed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// stored claims key with the settings of env, reads it and the keys in reads back, and returns
	// the bytes stored.
	stored := func(env map[string]string, key string, reads ...string) []byte {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		s, err := loadSettings([]string{"-data-dir", dir})
		if err != nil {
			t.Fatal(err)
		}
		st, closeStore, err := s.openStore(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if claimed, _, _, err := st.Claim(ctx, key, "o", fixtures.Tickets16K, time.Minute, time.Hour); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		for _, k := range append(reads, key) {
			if _, p, err := st.Get(ctx, k); err != nil || !bytes.Equal(p.Claim, fixtures.Tickets16K) {
				t.Errorf("%s, read with %v: %d bytes, %v", k, env, len(p.Claim), err)
			}
		}
		closeStore()
		plain, err := boltstore.Open(dir, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		_, raw, err := plain.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return raw.Claim
	}
	if raw := stored(nil, "default"); !bytes.HasPrefix(raw, []byte("idz1")) || len(raw) > len(fixtures.Tickets16K)/2 {
		t.Errorf("by default, a %d-byte part was stored as %d bytes starting %q, want compressed", len(fixtures.Tickets16K), len(raw), raw[:4])
	}
	key := map[string]string{"IDEMGATEWAY_ENCRYPTION_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
	if raw := stored(key, "encrypted"); !bytes.HasPrefix(raw, []byte("idg1")) || len(raw) > len(fixtures.Tickets16K)/2 {
		t.Errorf("encrypted, a %d-byte part was stored as %d bytes starting %q, want compressed, then sealed", len(fixtures.Tickets16K), len(raw), raw[:4])
	}
	t.Setenv("IDEMGATEWAY_ENCRYPTION_KEY", "")
	if raw := stored(map[string]string{"IDEMGATEWAY_COMPRESS_MIN_BYTES": "0"}, "off", "default"); !bytes.Equal(raw, fixtures.Tickets16K) {
		t.Errorf("with IDEMGATEWAY_COMPRESS_MIN_BYTES=0, a %d-byte part was stored as %d bytes, want as it is", len(fixtures.Tickets16K), len(raw))
	}
}
