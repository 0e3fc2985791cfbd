package childproc

import (
	"os"
	"time"
)

// SignalAndWait sends each of sigs to the child p, unless it has exited already (exited closed),
// and waits for it to exit, killing it when timeout passes first.
func SignalAndWait(p *os.Process, exited <-chan struct{}, timeout time.Duration, sigs ...os.Signal) {
	select {
	case <-exited:
		return
	default:
	}
	for _, sig := range sigs {
		_ = p.Signal(sig)
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = p.Kill()
		<-exited
	}
}
