package gateway

import "sync"

// SettleNotifier is implemented by stores that several gateway processes share (the Redis store):
// NotifySettled calls fn with the key of every record that any process commits, releases or marks
// unknown, for as long as the store is open. The gateway uses it to wake the duplicates that wait
// (concurrency: wait) without polling the store; a store without it still works, woken by the
// settles of this process and by a slow poll.
type SettleNotifier interface {
	NotifySettled(fn func(key string))
}

// waiters are the duplicates of this process waiting for a record to settle, by store key.
type waiters struct {
	mu   sync.Mutex
	keys map[string]map[chan struct{}]struct{}
}

// wait returns a channel that is closed once key settles, and a function that stops the wait.
func (w *waiters) wait(key string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		w.keys = make(map[string]map[chan struct{}]struct{})
	}
	if w.keys[key] == nil {
		w.keys[key] = make(map[chan struct{}]struct{})
	}
	ch := make(chan struct{})
	w.keys[key][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, waiting := w.keys[key][ch]; waiting {
			delete(w.keys[key], ch)
			if len(w.keys[key]) == 0 {
				delete(w.keys, key)
			}
		}
	}
}

// settled wakes every waiter of key.
func (w *waiters) settled(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.keys[key] {
		close(ch)
	}
	delete(w.keys, key)
}
