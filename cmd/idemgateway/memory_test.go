package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestGCPolicy: a memory limit, the container's (90 % of it) or GOMEMLIMIT's, makes an unset GOGC
// 400; without one, or with GOGC set, GOGC is left as it is. It changes the test process's
// collector, so it runs alone and puts it back.
func TestGCPolicy(t *testing.T) {
	gogc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(gogc); debug.SetMemoryLimit(limit) })
	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	for _, c := range []struct {
		name      string
		env       map[string]string
		runtime   int64 // the memory limit the runtime read from GOMEMLIMIT at start
		provider  memlimit.Provider
		wantLimit int64
		wantGOGC  int
		wantLog   string
	}{
		{"container limit", nil, math.MaxInt64, memlimit.Limit(1 << 30), 1 << 30 * 9 / 10, 400, `"gogc":400,"memory_limit":966367641`},
		{"no limit", nil, math.MaxInt64, noLimit, math.MaxInt64, gogc, `"memory_limit":"none"`},
		{"GOGC set", map[string]string{"GOGC": "150"}, math.MaxInt64, memlimit.Limit(1 << 30), 1 << 30 * 9 / 10, gogc, `"memory_limit":966367641`},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "512MiB"}, 512 << 20, memlimit.Limit(1 << 30), 512 << 20, 400, `"gogc":400,"memory_limit":536870912`},
		{"AUTOMEMLIMIT off", map[string]string{"AUTOMEMLIMIT": "off"}, math.MaxInt64, memlimit.Limit(1 << 30), math.MaxInt64, gogc, `"memory_limit":"none"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
				t.Setenv(k, c.env[k]) // put back when the test ends
				if _, set := c.env[k]; !set {
					_ = os.Unsetenv(k)
				}
			}
			debug.SetGCPercent(gogc)
			debug.SetMemoryLimit(c.runtime)
			var logs bytes.Buffer
			returned := setGCPolicy(slog.New(slog.NewJSONHandler(&logs, nil)), c.provider)
			if got := debug.SetMemoryLimit(-1); got != c.wantLimit || returned != c.wantLimit {
				t.Errorf("memory limit %d (returned %d), want %d", got, returned, c.wantLimit)
			}
			if got := debug.SetGCPercent(gogc); got != c.wantGOGC {
				t.Errorf("GOGC %d, want %d", got, c.wantGOGC)
			}
			if !strings.Contains(logs.String(), c.wantLog) {
				t.Errorf("log %q, want it to hold %s", logs.String(), c.wantLog)
			}
		})
	}
}

// TestInflightBytes: the parse budget is IDEMGATEWAY_MAX_INFLIGHT_BYTES when set (with a warning
// when it is over the memory limit), else a quarter of the memory limit, at least 1 MiB and at
// most 256 MiB (256 MiB without a limit).
func TestInflightBytes(t *testing.T) {
	for _, c := range []struct {
		set, limit, want int64
		warned           bool
	}{
		{0, math.MaxInt64, 256 << 20, false},
		{0, 256 << 20 * 9 / 10, 256 << 20 * 9 / 10 / 4, false}, // the Helm chart's limit
		{0, 4 << 30, 256 << 20, false},
		{0, 2 << 20, 1 << 20, false},
		{64 << 20, 256 << 20, 64 << 20, false},
		{1 << 30, math.MaxInt64, 1 << 30, false},
		{1 << 30, 512 << 20, 1 << 30, true},
	} {
		var logs bytes.Buffer
		got := inflightBytes(slog.New(slog.NewJSONHandler(&logs, nil)), c.set, c.limit)
		if got != c.want {
			t.Errorf("inflightBytes(%d, %d) = %d, want %d", c.set, c.limit, got, c.want)
		}
		if warned := strings.Contains(logs.String(), `"level":"WARN"`); warned != c.warned {
			t.Errorf("inflightBytes(%d, %d) warned %v, want %v: %s", c.set, c.limit, warned, c.warned, logs.String())
		}
	}
}
