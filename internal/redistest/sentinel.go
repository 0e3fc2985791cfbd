package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// SentinelOptions configure StartSentinels. The zero value is a fast-failing setup for tests:
// master name "mymaster", a majority quorum, down after 500 ms, failover timeout 2 s.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor the primary under. Default "mymaster".
	MasterName string
	// Quorum is how many sentinels must agree that the primary is down. Default a majority.
	Quorum int
	// DownAfter is how long the primary must not answer before a sentinel thinks it down
	// (sentinel down-after-milliseconds). Default 500 ms.
	DownAfter time.Duration
	// FailoverTimeout is the sentinels' failover-timeout. Default 2 s.
	FailoverTimeout time.Duration
	// Password is each sentinel's own password (requirepass), which clients send to the
	// sentinels. Default empty.
	Password string
	// MasterPassword is the password the sentinels send to the primary and its replicas
	// (sentinel auth-pass). Default empty.
	MasterPassword string
}

// Sentinels are Redis Sentinel processes that watch one primary and fail it over to a replica.
type Sentinels struct {
	// Servers are the sentinel processes.
	Servers []*Server
	opts    SentinelOptions
}

// SentinelReadyTimeout bounds how long StartSentinels waits for the sentinels to discover the
// replicas and each other.
const SentinelReadyTimeout = eventually.Ceiling

// StartSentinels starts n sentinels (redis-server --sentinel, each with a generated configuration
// file in its own temporary directory) that monitor primary, and waits until each sentinel knows
// the other n-1 sentinels and as many replicas as primary has connected. Start the replicas first
// (Options.ReplicaOf). Each sentinel is stopped when the test ends.
func StartSentinels(tb testing.TB, primary *Server, n int, opts SentinelOptions) *Sentinels {
	tb.Helper()
	if opts.MasterName == "" {
		opts.MasterName = "mymaster"
	}
	if opts.Quorum == 0 {
		opts.Quorum = n/2 + 1
	}
	if opts.DownAfter == 0 {
		opts.DownAfter = 500 * time.Millisecond
	}
	if opts.FailoverTimeout == 0 {
		opts.FailoverTimeout = 2 * time.Second
	}
	info, err := primary.info("replication")
	if err != nil {
		tb.Fatalf("redistest: INFO replication of the primary %s: %v", primary.Addr(), err)
		return nil
	}
	replicas := infoField(info, "connected_slaves")
	host, port, _ := net.SplitHostPort(primary.Addr())

	ss := &Sentinels{opts: opts}
	for range n {
		srv := &Server{tb: tb, bin: primary.bin, dir: tb.TempDir()}
		srv.opts.Password = opts.Password
		conf := filepath.Join(srv.dir, "sentinel.conf")
		srv.sentinel = conf
		err := srv.startOnFreePorts(func() error {
			lines := []string{
				"port " + strconv.Itoa(srv.port),
				"bind 127.0.0.1",
				"daemonize no",
				"dir " + srv.dir,
				"logfile sentinel.log",
				fmt.Sprintf("sentinel monitor %s %s %s %d", opts.MasterName, host, port, opts.Quorum),
				fmt.Sprintf("sentinel down-after-milliseconds %s %d", opts.MasterName, opts.DownAfter.Milliseconds()),
				fmt.Sprintf("sentinel failover-timeout %s %d", opts.MasterName, opts.FailoverTimeout.Milliseconds()),
				fmt.Sprintf("sentinel parallel-syncs %s 1", opts.MasterName),
			}
			if opts.MasterPassword != "" {
				lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", opts.MasterName, opts.MasterPassword))
			}
			if opts.Password != "" {
				lines = append(lines, "requirepass "+opts.Password)
			}
			return os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		})
		if err != nil {
			tb.Fatalf("redistest: start sentinel: %v", err)
			return nil
		}
		ss.Servers = append(ss.Servers, srv)
	}
	for _, srv := range ss.Servers {
		var last map[string]string
		ok := eventually.Within(SentinelReadyTimeout, func() bool {
			reply, err := srv.do("SENTINEL", "MASTER", opts.MasterName)
			last = pairs(reply)
			return err == nil && last["num-other-sentinels"] == strconv.Itoa(n-1) && last["num-slaves"] == replicas
		})
		if !ok {
			tb.Fatalf("redistest: sentinel %s did not discover %d other sentinels and %s replicas within %s: %v%s",
				srv.Addr(), n-1, replicas, SentinelReadyTimeout, last, srv.logTail())
			return nil
		}
	}
	return ss
}

// MasterName returns the name the sentinels monitor the primary under.
func (ss *Sentinels) MasterName() string { return ss.opts.MasterName }

// Addrs returns the sentinels' addresses, "127.0.0.1:<port>" each.
func (ss *Sentinels) Addrs() []string {
	addrs := make([]string, len(ss.Servers))
	for i, s := range ss.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Master returns the primary's address as the sentinel i reports it (SENTINEL
// get-master-addr-by-name), or an error.
func (ss *Sentinels) Master(i int) (string, error) {
	reply, err := ss.Servers[i].do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", ss.opts.MasterName)
	if err != nil {
		return "", err
	}
	list, _ := reply.([]any)
	if len(list) != 2 {
		return "", fmt.Errorf("unexpected reply %v", reply)
	}
	host, _ := list[0].(string)
	port, _ := list[1].(string)
	return net.JoinHostPort(host, port), nil
}

// WaitFailover polls every sentinel until all report a primary other than old, and returns it. It
// fails the test when that does not happen within timeout.
func (ss *Sentinels) WaitFailover(old string, timeout time.Duration) string {
	tb := ss.Servers[0].tb
	tb.Helper()
	var addrs []string
	ok := eventually.Within(timeout, func() bool {
		addrs = addrs[:0]
		for i := range ss.Servers {
			addr, err := ss.Master(i)
			if err != nil || addr == old {
				return false
			}
			addrs = append(addrs, addr)
		}
		for _, a := range addrs {
			if a != addrs[0] {
				return false
			}
		}
		return true
	})
	if !ok {
		tb.Fatalf("redistest: sentinels did not fail over from %s within %s (they report %v)%s", old, timeout, addrs, ss.Servers[0].logTail())
		return ""
	}
	return addrs[0]
}
