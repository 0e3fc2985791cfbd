package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Microsecond // 1 µs … 100 µs
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 99, 0},
		{"one sample", []time.Duration{7}, 50, 7},
		{"p50 of 100", hundred, 50, 50 * time.Microsecond},
		{"p99 of 100", hundred, 99, 99 * time.Microsecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Microsecond},
		{"tiny p is the minimum", hundred, 0.001, time.Microsecond},
		{"nearest rank rounds up", []time.Duration{1, 2, 3}, 50, 2},
		{"p99 of 3 is the maximum", []time.Duration{1, 2, 3}, 99, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"one", []float64{5}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tt.xs...)
			if got := median(tt.xs); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.xs[i] {
					t.Fatalf("median modified its input: %v, was %v", tt.xs, in)
				}
			}
		})
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestRatios(t *testing.T) {
	t.Parallel()
	got := ratios([]float64{800, 900, 1000}, []float64{1000, 1000, 0})
	if got[0] != 0.8 || got[1] != 0.9 || !math.IsNaN(got[2]) {
		t.Errorf("ratios = %v, want [0.8 0.9 NaN]", got)
	}
	// The median of paired ratios, not the ratio of medians.
	if m := median(ratios([]float64{1, 4, 9}, []float64{2, 4, 3})); m != 1 {
		t.Errorf("median of ratios [0.5 1 3] = %v, want 1", m)
	}
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		b    budget
		v    float64
		want string
	}{
		{"at least, met", atLeast(0.8), 0.8, "met"},
		{"at least, not met", atLeast(0.8), 0.79, "not met"},
		{"at most, met", atMost(3), 2.5, "met"},
		{"at most, not met", atMost(40), 41, "not met"},
		{"exactly, met within rounding", exactly(1), 1.004, "met"},
		{"exactly, not met", exactly(1), 1.5, "not met"},
		{"NaN is never met", atLeast(0), math.NaN(), "not met"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.b.verdict(tt.v); got != tt.want {
				t.Errorf("%s verdict(%v) = %q, want %q", tt.b, tt.v, got, tt.want)
			}
		})
	}
}

func TestMakeBody(t *testing.T) {
	t.Parallel()
	for _, size := range []int{256, 1024, 64 << 10} {
		key := newKeys("execute").next()
		body := makeBody(key, size)
		if len(body) != size {
			t.Errorf("makeBody(%q, %d) is %d bytes", key, size, len(body))
		}
		if string(body) != string(makeBody(key, size)) {
			t.Errorf("makeBody(%q, %d) is not deterministic", key, size)
		}
	}
}

// TestWriteCPU: the CPU table divides each run's CPU by the bare proxy's of the same repetition
// and body size, then takes the median; Redis's CPU counts on the gateway's side only.
func TestWriteCPU(t *testing.T) {
	t.Parallel()
	r := &results{
		cpuProxy: map[string][]float64{
			"bare/1024": {100, 200}, "execute/1024": {300, 400}, // ratios 3 and 2: median 2.5
		},
		cpuRedis:   map[string][]float64{"bare/1024": {0, 0}, "execute/1024": {100, 200}}, // with Redis: 4 and 3
		cpuHarness: map[string][]float64{"bare/1024": {50, 50}, "execute/1024": {60, 80}},
	}
	var b strings.Builder
	writeCPU(&b, machine{cores: 2}, r)
	for _, want := range []string{
		"| bare proxy, 1 KiB | 150 | 1.00 | 0 | 150 | 1.00 | 50 |",
		"| gateway execute, 1 KiB | 350 | 2.50 | 150 | 500 | 3.50 | 70 |",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("writeCPU lacks the row %q:\n%s", want, b.String())
		}
	}
}
