package pgstore

import (
	"context"
	"time"
)

// sweepEvery deletes expired rows every interval until ctx ends, in batches of 1000 so that no
// statement holds many locks for long. Expired rows are never read as live meanwhile: every
// statement compares expires_at with now().
func (s *Store) sweepEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := s.Sweep(ctx)
			if err != nil || n < 1000 {
				break
			}
		}
	}
}

// Sweep deletes up to 1000 expired rows now and returns how many it deleted.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.q.sweep)
	return tag.RowsAffected(), err
}
