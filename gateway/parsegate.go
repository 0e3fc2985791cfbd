package gateway

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/problem"
)

// Defaults of Options.
const (
	DefaultMaxBodyValues    = canonical.DefaultMaxValues
	DefaultMaxInflightBytes = 256 << 20 // 256 MiB
	DefaultParseWait        = 2 * time.Second
)

// smallParse is the largest body that parses outside the gate: its parse costs at most
// canonical.MemoryBound of 64 KiB (under 5 MiB, a few milliseconds), and a small request never
// waits behind large ones (docs/security.md#resource-limits).
const smallParse = 64 << 10

// parseGate bounds the work of the body parses under way (docs/security.md#resource-limits): a
// parse of a body over smallParse holds its canonical.MemoryBound of a budget of bytes
// (IDEMGATEWAY_MAX_INFLIGHT_BYTES) and one of GOMAXPROCS-1 slots (at least one), so large parses
// never take every core from the small requests. A parse that cannot get both within the wait
// is refused with problem.ErrOverloaded.
type parseGate struct {
	maxValues int
	capacity  int64
	wait      time.Duration
	bytes     *semaphore.Weighted
	slots     chan struct{}
	results   *prometheus.CounterVec // idemgateway_body_parses_total{result}
	held      prometheus.Gauge       // idemgateway_body_parse_bytes
}

// Results of idemgateway_body_parses_total.
const (
	parseSmall      = "small"      // under smallParse: not gated
	parseAdmitted   = "admitted"   // gated, got in at once
	parseWaited     = "waited"     // gated, got in after waiting
	parseOverloaded = "overloaded" // gated, refused with problem.ErrOverloaded
	parseTooComplex = "too_complex"
)

func newParseGate(opts *Options, m *metrics) *parseGate {
	m.parseBudget.Set(float64(opts.MaxInflightBytes))
	return &parseGate{
		maxValues: opts.MaxBodyValues,
		capacity:  opts.MaxInflightBytes,
		wait:      opts.ParseWait,
		bytes:     semaphore.NewWeighted(opts.MaxInflightBytes),
		slots:     make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
		results:   m.parses,
		held:      m.parseBytes,
	}
}

// gatedDocument returns the canonical document of req under c, through g while ctx lasts; with
// no gate (Explain's requests), the parse runs alone, under the default value budget.
func gatedDocument(ctx context.Context, g *parseGate, c *canonical.Canonicalizer, req *canonical.Request) ([]byte, error) {
	if g != nil {
		return g.document(ctx, c, req)
	}
	return c.Document(req)
}

// document returns the canonical document of req under c, once the gate lets its parse in.
// Errors wrap problem.ErrOverloaded, canonical.ErrBodyTooComplex or canonical.ErrInvalidBody.
func (g *parseGate) document(ctx context.Context, c *canonical.Canonicalizer, req *canonical.Request) ([]byte, error) {
	req.MaxValues = g.maxValues
	if len(req.Body) <= smallParse {
		return g.count(parseSmall, c, req)
	}
	weight := min(c.MemoryBound(len(req.Body), g.maxValues), g.capacity) // a larger one runs alone
	result := parseAdmitted
	select {
	case g.slots <- struct{}{}:
		if !g.bytes.TryAcquire(weight) {
			<-g.slots
			result = parseWaited
		}
	default:
		result = parseWaited
	}
	if result == parseWaited {
		ctx, cancel := context.WithTimeout(ctx, g.wait)
		defer cancel()
		if err := g.enter(ctx, weight); err != nil {
			g.results.WithLabelValues(parseOverloaded).Inc()
			return nil, fmt.Errorf("%w: %d body parses are under way; retry later", problem.ErrOverloaded, cap(g.slots))
		}
	}
	g.held.Add(float64(weight))
	defer func() {
		g.held.Sub(float64(weight))
		g.bytes.Release(weight)
		<-g.slots
	}()
	return g.count(result, c, req)
}

// enter takes a slot, then weight bytes, waiting until ctx is done.
func (g *parseGate) enter(ctx context.Context, weight int64) error {
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := g.bytes.Acquire(ctx, weight); err != nil {
		<-g.slots
		return err
	}
	return nil
}

// count runs the parse and counts its result.
func (g *parseGate) count(result string, c *canonical.Canonicalizer, req *canonical.Request) ([]byte, error) {
	doc, err := c.Document(req)
	if errors.Is(err, canonical.ErrBodyTooComplex) {
		result = parseTooComplex
	}
	g.results.WithLabelValues(result).Inc()
	return doc, err
}
