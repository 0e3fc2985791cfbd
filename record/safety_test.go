package record_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/idemgateway/idemgateway/record"
)

// unsafeStore is a store whose safety check reports err.
type unsafeStore struct {
	record.Store
	err error
}

func (s unsafeStore) Safe() error { return s.err }

// noticeStore is a store with settle notices, which counts the watches asked of it.
type noticeStore struct {
	record.Store
	watches *int
}

func (s noticeStore) WatchSettled(context.Context, string, func()) (func(), error) {
	*s.watches++
	return func() {}, nil
}

// TestWrappersPassOn: encryption at rest and compression do not hide the wrapped store's safety
// verdict from the gateway (docs/cases.md C15), and a store without one stays fit; each wrapper
// has settle notices exactly when the wrapped store has, so that the gateway's waiters are woken
// by them when they exist and are never told of a watch that cannot work when they do not.
func TestWrappersPassOn(t *testing.T) {
	t.Parallel()
	plain := openPlain(t)
	wrappers := map[string]func(record.Store) record.Store{
		"encrypted": func(s record.Store) record.Store {
			enc, err := record.Encrypted(s, bytes.Repeat([]byte{7}, 32))
			if err != nil {
				t.Fatal(err)
			}
			return enc
		},
		"compressed": func(s record.Store) record.Store { return record.Compressed(s, record.DefaultCompressMinBytes) },
	}
	evicting := errors.New("maxmemory-policy is allkeys-lru")
	for name, wrap := range wrappers {
		for _, tc := range []struct {
			name  string
			store record.Store
			want  error
		}{
			{"unsafe", unsafeStore{plain, evicting}, evicting},
			{"safe", unsafeStore{plain, nil}, nil},
			{"no reporter", plain, nil},
		} {
			r, ok := wrap(tc.store).(record.SafetyReporter)
			if !ok {
				t.Fatalf("%s, %s: the wrapper is no SafetyReporter", name, tc.name)
			}
			if got := r.Safe(); got != tc.want {
				t.Errorf("%s, %s: Safe() = %v, want %v", name, tc.name, got, tc.want)
			}
		}

		if _, ok := wrap(plain).(record.SettleNotifier); ok {
			t.Errorf("%s: around a store without settle notices, the wrapper has some", name)
		}
		watches := 0
		n, ok := wrap(noticeStore{plain, &watches}).(record.SettleNotifier)
		if !ok {
			t.Fatalf("%s: around a store with settle notices, the wrapper has none", name)
		}
		if _, err := n.WatchSettled(context.Background(), "k", func() {}); err != nil || watches != 1 {
			t.Errorf("%s: WatchSettled = %v, with %d watches of the wrapped store, want 1", name, err, watches)
		}
	}
}
