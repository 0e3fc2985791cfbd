package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/childproc"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// TestC13_FailoverClaimOnNewPrimary is field case C13 (docs/cases.md): Redis fails over after a claim, and a
// second gateway replica claims the same key on the new primary.
//
// A primary, a replica and three Sentinels; two gateway processes on the Sentinels; a route that
// forwards the scoped key to an upstream that de-duplicates by it. The replica follows the primary
// through a relay that the test freezes, so that the claim is acknowledged by the primary and never
// replicated: the asynchronous-replication window, opened on purpose rather than hoped for. Then
// SENTINEL FAILOVER promotes the replica (the old primary resyncs from it and loses the claim too),
// the second replica claims the key on the new primary, and the first one's call completes:
//
//   - the first replica's receipt write is refused by the owner check (fencing), and it says so in
//     its log and its store metrics; its client still gets the upstream's answer;
//   - the second replica's call reaches the upstream with the same forwarded key, the upstream
//     answers it with the first call's result, and that is the receipt both replicas replay;
//   - Up×1.
//
// The residual risk (docs/guarantees.md): without an upstream that de-duplicates by the forwarded
// key, this sequence executes twice. The sandbox de-duplicates by X-Sandbox-Idempotency-Key, as
// Stripe does by Idempotency-Key, and the route forwards the key on it (testdata/c13.yaml.tmpl).
func TestC13_FailoverClaimOnNewPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := StartSandbox(t)
	routesFile := WriteRoutes(t, "c13.yaml.tmpl", sb.URL)

	primary := redistest.Start(t, redistest.Options{})
	link := startRelay(t, primary.Addr())
	replica := redistest.Start(t, redistest.Options{ReplicaOf: link.addr()})
	// The sentinels know the primary by the relay's address, as the replica does (else they would
	// "fix" the replica's configuration to the primary's own address, around the relay).
	sentinels := startSentinels(t, link.addr(), 3)
	storeEnv := []string{
		"IDEMGATEWAY_REDIS_ADDRS=" + strings.Join(sentinels, ","),
		"IDEMGATEWAY_REDIS_MASTER=" + sentinelMaster,
	}
	first, second := StartGateway(t, routesFile, storeEnv), StartGateway(t, routesFile, storeEnv)

	// The claim reaches the primary only.
	link.freeze()
	req := Request{Key: "c13", Body: ticketBody}
	firstCall := goSend(first, held(req, "c13-first"))
	sb.waitHeld(t, "c13-first", 1)

	// Failover: the replica, without the claim, becomes the primary.
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	defer sc.Close()
	if err := sc.Failover(ctx, sentinelMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	waitSentinelsReport(t, sentinels, replica.Addr())
	waitReplicaOf(t, primary, replica) // the old primary resynced: its copy of the claim is gone too
	waitStoreSwitched(t, first, "c13-probe-first")
	attempts := sb.Stats(t).Requests.ByEndpoint[TicketsEndpoint] // the first call's, and the probes'

	// The second replica claims the key on the new primary and calls the upstream.
	secondCall := claimHeld(t, sb, second, held(req, "c13-second"), "c13-second")

	// The first call completes: its receipt write must be refused.
	sb.release(t, "c13-first")
	fr := firstCall.wait(t)
	id := expectCreated(t, fr)
	first.waitLog(t, "record not settled: the store refused it: the record is gone (deleted, or expired) or another execution owns it (lease lost)", 1)
	if n := first.metric(t, `idemgateway_store_duration_seconds_count{op="commit",result="refused"}`); n != 1 {
		t.Errorf("first replica: %v commits refused, want 1", n)
	}

	// The second call: the upstream de-duplicates by the forwarded key; this receipt is stored.
	sb.release(t, "c13-second")
	sr := secondCall.wait(t)
	if got := expectCreated(t, sr); got != id {
		t.Errorf("second replica's ticket %q, want the first call's %q (the upstream de-duplicates by the forwarded key)", got, id)
	}
	if n := second.logCount("record not settled: the store refused it: the record is gone (deleted, or expired) or another execution owns it (lease lost)"); n != 0 {
		t.Errorf("second replica: %d refused writes logged, want 0: the new primary's owner is the second replica", n)
	}
	if n := second.metric(t, `idemgateway_store_duration_seconds_count{op="commit",result="ok"}`); n != 1 {
		t.Errorf("second replica: %v commits stored, want 1", n)
	}
	// The second call reached the upstream with the first's forwarded key and was answered from
	// the first's result (one effect, below).
	expectAttempts(t, sb, attempts+1)

	for _, g := range []*Gateway{first, second} {
		expectReplayOf(t, g.do(t, req), sr)
		if rec := g.mustRecord(t, "create_ticket", "c13"); rec.State != "committed" || rec.RemoteID != id {
			t.Errorf("record: state %q, remote_id %q; want committed, %q", rec.State, rec.RemoteID, id)
		}
	}
	expectUp(t, sb, 1)
}

// claimHeld sends req to g until it is claimed, which the request waiting on the sandbox's hold
// name shows; answers 503 store-unavailable (the gateway's Redis client still switching to the new
// primary) are retried. It returns the held request.
func claimHeld(t *testing.T, sb *Sandbox, g *Gateway, req Request, name string) *pending {
	t.Helper()
	var held *pending
	eventually.True(t, "a claim on the new primary", func() bool {
		p := goSend(g, req)
		if waitHeldOrDone(t, sb, name, p) {
			held = p
			return true
		}
		if r := p.wait(t); r.Status != http.StatusServiceUnavailable {
			t.Fatalf("claim on the new primary: %d %q, want the call to reach the upstream; body %.300s", r.Status, r.Decision(), r.Body)
		}
		return false
	})
	return held
}

// waitStoreSwitched waits until the gateway writes to the new primary: a claim under key succeeds
// (the sandbox answers it 422 without effect, so the key is released and nothing is executed).
func waitStoreSwitched(t *testing.T, g *Gateway, key string) {
	t.Helper()
	eventually.True(t, "the gateway to claim on the new primary", func() bool {
		r := g.do(t, Request{Key: key, Body: ticketBody, Header: map[string]string{"X-Sandbox-Status": "422"}})
		return r.Status == http.StatusUnprocessableEntity && r.Decision() == "execute"
	})
}

// waitReplicaOf waits until old replicates primary with the first sync done.
func waitReplicaOf(t *testing.T, old, primary *redistest.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: old.Addr()})
	defer c.Close()
	eventually.True(t, old.Addr()+" to replicate "+primary.Addr(), func() bool {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") &&
			strings.Contains(info, "master_port:"+strconv.Itoa(primary.Port())+"\r\n") &&
			strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0")
	})
}

// relay is a TCP relay to a Redis primary. Once frozen, it drops what the primary sends on the
// replication links (the connections that sent PSYNC or SYNC) and keeps them open, so a replica
// still counts as connected (a Sentinel may promote it) while it misses every write from then on.
// Other connections (gateways, sentinels) are relayed both ways.
type relay struct {
	ln     net.Listener
	frozen atomic.Bool
	wg     sync.WaitGroup
}

// startRelay listens on a free loopback port and relays each connection to target until t ends.
func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &relay{ln: ln}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			var replication atomic.Bool
			l.wg.Go(func() { copyUp(u, c, &replication); u.Close() })
			l.wg.Go(func() { l.copyDown(c, u, &replication); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		l.wg.Wait()
	})
	return l
}

func (l *relay) addr() string { return l.ln.Addr().String() }

// freeze drops everything the primary sends from now on.
func (l *relay) freeze() { l.frozen.Store(true) }

// copyUp relays client to primary, and marks the connection a replication link when the client
// asks for the replication stream.
func copyUp(dst, src net.Conn, replication *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if b := buf[:n]; bytes.Contains(b, []byte("PSYNC")) || bytes.Contains(b, []byte("\r\nSYNC\r\n")) {
				replication.Store(true)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyDown relays primary to client, except on a replication link once frozen.
func (l *relay) copyDown(dst, src net.Conn, replication *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		// Checked after the read: bytes read after freeze returned are dropped, whenever they left.
		if n > 0 && !(l.frozen.Load() && replication.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// sentinelMaster is the name the test's sentinels monitor the primary under.
const sentinelMaster = "c13"

// startSentinels starts n Redis Sentinels (redis-server --sentinel) that monitor the primary at
// addr, and waits until each knows the others and one replica. They are slow to think the primary
// down (it never is here): the test fails over with SENTINEL FAILOVER. They stop when t ends.
// (redistest.StartSentinels monitors a Server's own address; the primary here is behind a relay.)
func startSentinels(t *testing.T, addr string, n int) []string {
	t.Helper()
	bin, err := exec.LookPath(redistest.Binary)
	if err != nil {
		t.Fatalf("%s not found on PATH: %v", redistest.Binary, err)
	}
	host, port, _ := net.SplitHostPort(addr)
	var addrs []string
	for i := range n {
		dir := t.TempDir()
		var sentinelAddr string
		for attempt := 0; ; attempt++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			sentinelAddr = ln.Addr().String()
			ln.Close()
			_, sport, _ := net.SplitHostPort(sentinelAddr)
			conf := filepath.Join(dir, "sentinel.conf")
			lines := []string{
				"port " + sport, "bind 127.0.0.1", "daemonize no", "dir " + dir,
				fmt.Sprintf("sentinel monitor %s %s %s %d", sentinelMaster, host, port, n/2+1),
				fmt.Sprintf("sentinel down-after-milliseconds %s 60000", sentinelMaster),
				fmt.Sprintf("sentinel failover-timeout %s 10000", sentinelMaster),
			}
			if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tryStartSentinel(t, fmt.Sprintf("sentinel %d", i), bin, conf); err == nil {
				break
			} else if attempt == 4 { // the freed port was taken each time
				t.Fatalf("sentinel %d: %v", i, err)
			}
		}
		addrs = append(addrs, sentinelAddr)
	}
	for _, a := range addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		eventually.True(t, "sentinel "+a+" to know the others and the replica", func() bool {
			m, err := sc.Master(context.Background(), sentinelMaster).Result()
			return err == nil && m["num-other-sentinels"] == strconv.Itoa(n-1) && m["num-slaves"] == "1"
		})
		sc.Close()
	}
	return addrs
}

// tryStartSentinel starts one sentinel and waits for its monitoring line; an error means it exited
// first (most likely its port was taken). The sentinel is killed when t ends.
func tryStartSentinel(t *testing.T, name, bin, conf string) error {
	t.Helper()
	cmd := exec.Command(bin, conf, "--sentinel")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = childproc.SysProcAttr()
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("%s: %v", name, err)
	}
	w.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, "+monitor master") {
			go func() { _, _ = io.Copy(io.Discard, br); r.Close() }() // keep reading: no SIGPIPE
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return nil
		}
		if err != nil {
			r.Close()
			_ = cmd.Wait()
			return fmt.Errorf("%s exited before it monitored the primary", name)
		}
	}
}

// waitSentinelsReport waits until every sentinel reports the primary at want.
func waitSentinelsReport(t *testing.T, sentinels []string, want string) {
	t.Helper()
	for _, a := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		eventually.True(t, "sentinel "+a+" to report the primary at "+want, func() bool {
			got, err := sc.GetMasterAddrByName(context.Background(), sentinelMaster).Result()
			return err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == want
		})
		sc.Close()
	}
}

// waitHeldOrDone waits until p's request waits on the sandbox's hold name (true) or p is answered
// (false).
func waitHeldOrDone(t *testing.T, sb *Sandbox, name string, p *pending) bool {
	t.Helper()
	for {
		if sb.holding(t, name) > 0 {
			return true
		}
		select {
		case <-p.done:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}
