package record

import (
	"context"
	"time"
)

// payloadCodec changes a record's payload parts on their way into a store and back: encryption
// at rest (encrypt.go) and compression (compress.go). seal must give the same bytes for the same
// key and payload, so that a transition sent twice is recognized as the same call
// (docs/guarantees.md#lost-replies); open undoes it, or fails with an error wrapping ErrCorrupt.
type payloadCodec interface {
	seal(key string, payload []byte) []byte
	open(key string, payload []byte) ([]byte, error)
}

// codedStore is a Store whose payload parts pass through codec: sealed as they are written,
// opened as they are read. Keys, states, owners, leases and expiries pass unchanged: the store's
// state machine needs them.
type codedStore struct {
	Store
	codec payloadCodec
}

func (s *codedStore) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, Payload, error) {
	claimed, state, stored, err := s.Store.Claim(ctx, key, owner, s.codec.seal(key, payload), lease, ttl)
	if err != nil || claimed {
		return claimed, state, Payload{Claim: payload}, err
	}
	plain, err := s.openPayload(key, stored)
	return claimed, state, plain, err
}

func (s *codedStore) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (bool, error) {
	return s.Store.Reclaim(ctx, key, from, owner, s.codec.seal(key, payload), lease, ttl)
}

func (s *codedStore) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.Commit(ctx, key, owner, s.codec.seal(key, settle), ttl)
}

func (s *codedStore) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.MarkUnknown(ctx, key, owner, s.codec.seal(key, settle), ttl)
}

func (s *codedStore) Get(ctx context.Context, key string) (string, Payload, error) {
	state, stored, err := s.Store.Get(ctx, key)
	if err != nil || state == "" {
		return state, stored, err
	}
	plain, err := s.openPayload(key, stored)
	return state, plain, err
}

// openPayload opens the parts of p, each sealed by seal. An empty part is none, and stays empty:
// the Settle of a record nothing settled, the Claim in what a Claim answers of a settled record
// (Store.Claim).
func (s *codedStore) openPayload(key string, p Payload) (plain Payload, err error) {
	if len(p.Claim) > 0 {
		if plain.Claim, err = s.codec.open(key, p.Claim); err != nil {
			return Payload{}, err
		}
	}
	if len(p.Settle) > 0 {
		if plain.Settle, err = s.codec.open(key, p.Settle); err != nil {
			return Payload{}, err
		}
	}
	return plain, nil
}

// coded wraps store so that its payload parts pass through codec. The wrapper is a SettleNotifier
// exactly when store is one, so that the gateway treats it as it would treat store unwrapped.
func coded(store Store, codec payloadCodec) Store {
	s := &codedStore{Store: store, codec: codec}
	if n, ok := store.(SettleNotifier); ok {
		return &codedNotifier{codedStore: s, notifier: n}
	}
	return s
}

// codedNotifier is a codedStore around a SettleNotifier, whose notices it passes on: the keys are
// the same, only payloads are sealed.
type codedNotifier struct {
	*codedStore
	notifier SettleNotifier
}

func (s *codedNotifier) WatchSettled(ctx context.Context, key string, settled func()) (stop func(), err error) {
	return s.notifier.WatchSettled(ctx, key, settled)
}

// Safe passes on the wrapped store's verdict (SafetyReporter); a wrapped store without one is fit
// whenever it answers, as it would be unwrapped.
func (s *codedStore) Safe() error {
	if r, ok := s.Store.(SafetyReporter); ok {
		return r.Safe()
	}
	return nil
}

// ListUnknown opens the payloads of the page; one that does not open is passed on as it is
// stored, which Decode refuses as corrupt, so that the readers of the list (the admin API, the
// unknown-outcome metrics) skip that record and go on with the others.
func (s *codedStore) ListUnknown(ctx context.Context, prefix, cursor string, limit int) ([]string, []Payload, string, error) {
	keys, stored, next, err := s.Store.ListUnknown(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, nil, "", err
	}
	for i, p := range stored {
		if opened, err := s.openPayload(keys[i], p); err == nil {
			stored[i] = opened
		}
	}
	return keys, stored, next, nil
}
