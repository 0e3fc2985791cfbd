package allocs

import (
	"sync"
	"testing"
)

// sinks keep the allocations on the heap: one for the function, one for the other goroutine.
var sink, noise []byte

func TestBytesIsTheFunctionsOwn(t *testing.T) {
	// Another goroutine allocates all along: the least of the runs is still f's own 64 KiB.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				noise = make([]byte, 1<<20)
			}
		}
	})
	n := Bytes(20, func() { sink = make([]byte, 64<<10) })
	objects := Objects(20, func() { sink = make([]byte, 64<<10) })
	close(stop)
	wg.Wait()
	if n < 64<<10 || n > 64<<10+4096 {
		t.Fatalf("Bytes = %d, want 64 KiB (what f allocates)", n)
	}
	if objects != 1 {
		t.Fatalf("Objects = %d, want 1 (what f allocates)", objects)
	}
	if n := Bytes(3, func() {}); n != 0 {
		t.Fatalf("Bytes of a function that allocates nothing = %d, want 0", n)
	}
}
