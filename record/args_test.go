package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/record"
)

func TestCheckArgs(t *testing.T) {
	t.Parallel()
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	tests := []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"valid", record.CheckArgs(live, "k", "o", record.Positive("lease", time.Second)), ""},
		{"no durations", record.CheckArgs(live, "k", "o"), ""},
		{"empty key first", record.CheckArgs(done, "", "", record.Positive("lease", 0)), "empty key"},
		{"empty owner", record.CheckArgs(live, "k", "", record.Positive("lease", 0)), "empty owner"},
		{"first bad duration", record.CheckArgs(live, "k", "o", record.Positive("lease", time.Second), record.Positive("ttl", -time.Second)), "ttl -1s is not positive"},
		{"zero duration", record.CheckArgs(live, "k", "o", record.Positive("lease", 0)), "lease 0s is not positive"},
		{"done context last", record.CheckArgs(done, "k", "o", record.Positive("lease", time.Second)), context.Canceled.Error()},
		{"key only", record.CheckKeyArg(live, "k"), ""},
		{"key only, empty", record.CheckKeyArg(done, ""), "empty key"},
		{"key only, done context", record.CheckKeyArg(done, "k"), context.Canceled.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if tt.err != nil {
				got = tt.err.Error()
			}
			if got != tt.want {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{1500 * time.Microsecond, 2},
		{time.Minute, 60_000},
	}
	for _, tt := range tests {
		if got := record.Millis(tt.d); got != tt.want {
			t.Errorf("Millis(%s) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
