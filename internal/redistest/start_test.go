package redistest

import (
	"errors"
	"os/exec"
	"testing"
)

// TestStartKnowsItsOwnServer: a redis-server started on a port another one took (the race between
// freePort and the bind) must not be taken for ready because the other answers PING there: start
// reports that its process exited, and Start then tries a new port.
func TestStartKnowsItsOwnServer(t *testing.T) {
	t.Parallel()
	other := Start(t, Options{})
	bin, err := exec.LookPath(Binary)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{tb: t, bin: bin, dir: t.TempDir(), port: other.Port()}
	if err := s.start(); !errors.Is(err, errExited) {
		s.Stop()
		t.Fatalf("start on a port another server holds: %v, want %v", err, errExited)
	}
}
