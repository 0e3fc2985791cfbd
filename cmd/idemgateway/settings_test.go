package main

import (
	"strings"
	"testing"
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
				s.DataDir == "./data" && s.LogLevel == "info" && s.LogFormat == "json" && !s.RedisAllowEviction
		}},
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
