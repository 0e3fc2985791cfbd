package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/record"
)

// What the gateway's metrics read of the store's outcome_unknown records (docs/operations.md#metrics):
// a scan of the store's index of them at a scrape, at most every unknownScanEvery, of at most
// unknownScanMax records. Such records are exceptions an operator settles, so a scan is short; the bound keeps
// a store that holds many from making every scrape long.
const (
	unknownScanEvery = 30 * time.Second
	unknownScanMax   = 10000
	unknownScanPage  = 1000
)

// unknownCollector is the Prometheus collector of the store's outcome_unknown records:
// how many there are, and when the first of them expires. A record that expires frees its key,
// and the next retry executes again although the first call may have acted (case C23): the
// alert on the expiry (deploy/prometheus-alerts.yaml) asks an operator to settle it before then.
type unknownCollector struct {
	g                 *Gateway
	records, expiring *prometheus.Desc

	mu      sync.Mutex
	scanned time.Time // when the last scan ran (g.now); zero before the first
	n       int       // records found, at most unknownScanMax
	first   time.Time // the earliest expires_at among them; zero when none
	ok      bool      // the last scan read the whole index, up to the bound
}

func newUnknownCollector(g *Gateway) *unknownCollector {
	return &unknownCollector{g: g,
		records: prometheus.NewDesc("idemgateway_store_outcome_unknown_records",
			"Records the store holds outcome_unknown (at most 10000 counted, read at most every 30 s): each blocks its key until an operator resolves it or it expires.", nil, nil),
		expiring: prometheus.NewDesc("idemgateway_store_outcome_unknown_next_expiry_timestamp_seconds",
			"When the first outcome_unknown record expires (Unix time): its key is then free, and a retry executes again. Absent while there is none.", nil, nil),
	}
}

func (c *unknownCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.records
	ch <- c.expiring
}

// Collect reports the last scan, running one first when it is older than unknownScanEvery. A
// scan the store fails reports nothing: a missing series, not a count of zero.
func (c *unknownCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.g.now(); c.scanned.IsZero() || now.Sub(c.scanned) >= unknownScanEvery {
		c.n, c.first, c.ok = c.scan()
		c.scanned = now
	}
	if !c.ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.records, prometheus.GaugeValue, float64(c.n))
	if !c.first.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.expiring, prometheus.GaugeValue, float64(c.first.UnixMilli())/1e3)
	}
}

// scan reads the store's outcome_unknown records, up to unknownScanMax, in pages.
func (c *unknownCollector) scan() (n int, first time.Time, ok bool) {
	cursor := ""
	for n < unknownScanMax {
		ctx, cancel := c.g.storeContext(context.Background())
		keys, stored, next, err := c.g.store.ListUnknown(ctx, "", cursor, min(unknownScanPage, unknownScanMax-n))
		cancel()
		if err != nil {
			c.g.log.Error("counting outcome_unknown records for /metrics: the store failed", "err", err)
			return 0, time.Time{}, false
		}
		for i, p := range stored {
			n++
			rec, err := record.Decode(record.StateUnknown, p)
			if err != nil {
				c.g.log.Error("counting outcome_unknown records: an unreadable record", "key", keys[i], "err", err)
				continue
			}
			if first.IsZero() || rec.ExpiresAt.Before(first) {
				first = rec.ExpiresAt
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return n, first, true
}
