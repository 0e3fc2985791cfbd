package main

import (
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/routes"
)

// TestDefaultGraceNeverShrinks: the default grace is the longest upstream timeout of every routes
// file seen plus 5 s, at least 5 s; a reload that lowers the timeouts keeps it (a call started under
// the older file may still run).
func TestDefaultGraceNeverShrinks(t *testing.T) {
	t.Parallel()
	file := func(timeouts ...time.Duration) *routes.Config {
		cfg := &routes.Config{Upstreams: map[string]*routes.Upstream{}}
		for i, d := range timeouts {
			cfg.Upstreams[string(rune('a'+i))] = &routes.Upstream{Timeout: d}
		}
		return cfg
	}
	var g defaultGrace
	steps := []struct {
		name string
		cfg  *routes.Config
		want time.Duration
	}{
		{"nothing seen", nil, 5 * time.Second},
		{"no upstreams", file(), 5 * time.Second},
		{"start file", file(time.Second, 300*time.Millisecond), 6 * time.Second},
		{"reload raises", file(30 * time.Second), 35 * time.Second},
		{"reload lowers", file(time.Second), 35 * time.Second},
	}
	for _, s := range steps {
		if s.cfg != nil {
			g.see(s.cfg)
		}
		if got := g.get(); got != s.want {
			t.Errorf("%s: grace %s, want %s", s.name, got, s.want)
		}
	}
}
