package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
	"github.com/idemgateway/idemgateway/routes"
)

// lostReplyReadTimeout is the read timeout of the clients that TestLostReplies stalls: short enough
// that go-redis gives up on the stalled reply and sends the script again well within the gateway's
// store timeout (2 s), long enough that no reply Redis does send is taken for lost on a loaded
// machine (the tests count the copies).
const lostReplyReadTimeout = time.Second

// scriptOf matches the EVALSHA of op's script on the record at rkey: "commit" and "mark_unknown"
// are the settle script to their state (its fifth argument).
func scriptOf(op, rkey string) func(args [][]byte) bool {
	script, state := op, ""
	switch op {
	case "commit":
		script, state = "settle", record.StateCommitted
	case "mark_unknown":
		script, state = "settle", record.StateUnknown
	}
	sha := redisstore.ScriptSHA(script)
	return func(args [][]byte) bool {
		return len(args) >= 4 && strings.EqualFold(string(args[0]), "evalsha") && string(args[1]) == sha && string(args[3]) == rkey &&
			(state == "" || len(args) == 9 && string(args[8]) == state)
	}
}

// proxied is a Redis topology behind fault proxies: one proxy per node, and the options of a
// client whose every connection goes through them.
type proxied struct {
	proxies []*faultproxy.Proxy
	client  func() redis.UniversalClient // a client through the proxies, with go-redis's retries
	raw     redis.UniversalClient        // a client of the nodes themselves
}

// proxiedRedis puts one Redis behind a proxy.
func proxiedRedis(t *testing.T) proxied {
	srv := redistest.Start(t, redistest.Options{})
	p := faultproxy.Start(t, srv.Addr())
	return proxied{
		proxies: []*faultproxy.Proxy{p},
		client: func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: 3, ReadTimeout: lostReplyReadTimeout, ContextTimeoutEnabled: true})
		},
		raw: newClient(t, srv),
	}
}

// proxiedCluster puts each master of a Redis Cluster behind a proxy of its own. A cluster client
// learns the nodes' addresses from CLUSTER SLOTS, so its dialer maps each to the node's proxy.
func proxiedCluster(t *testing.T) proxied {
	cluster := redistest.StartCluster(t, 3, redistest.Options{})
	var pc proxied
	proxyOf := map[string]string{}
	for _, n := range cluster.Nodes {
		p := faultproxy.Start(t, n.Addr())
		pc.proxies = append(pc.proxies, p)
		proxyOf[n.Addr()] = p.Addr()
	}
	pc.client = func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cluster.Addrs(),
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if to, ok := proxyOf[addr]; ok {
					addr = to
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			MaxRetries: 3, ReadTimeout: lostReplyReadTimeout, ContextTimeoutEnabled: true,
		})
	}
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = raw.Close() })
	pc.raw = raw
	return pc
}

// lostReplyCase is one transition whose reply TestLostReplies loses: setup brings the record to
// where the transition applies, do makes it and reports its answer (claimed, or ok), and check
// reads what it left.
type lostReplyCase struct {
	op    string
	setup func(t *testing.T, s *redisstore.Store)
	do    func(s *redisstore.Store) (bool, error)
	check func(t *testing.T, s *redisstore.Store)
}

var lostReplyCases = []lostReplyCase{
	{"claim", nil, func(s *redisstore.Store) (bool, error) {
		claimed, _, _, err := s.Claim(ctx, "k", "owner", []byte("claim"), time.Minute, time.Hour)
		return claimed, err
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, record.StateInProgress, "claim", "")
		if claimed, state, _, err := s.Claim(ctx, "k", "other", []byte("retry"), time.Minute, time.Hour); claimed || state != record.StateInProgress || err != nil {
			t.Errorf("another owner's Claim = %v, %q, %v; want in_progress", claimed, state, err)
		}
	}},
	{"renew", claimed, func(s *redisstore.Store) (bool, error) {
		return s.Renew(ctx, "k", "owner", time.Minute)
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, record.StateInProgress, "claim", "")
	}},
	{"commit", claimed, func(s *redisstore.Store) (bool, error) {
		return s.Commit(ctx, "k", "owner", []byte("receipt"), time.Hour)
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, record.StateCommitted, "claim", "receipt")
	}},
	{"mark_unknown", claimed, func(s *redisstore.Store) (bool, error) {
		return s.MarkUnknown(ctx, "k", "owner", []byte("unknown"), time.Hour)
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, record.StateUnknown, "claim", "unknown")
		if keys, _, _, err := s.ListUnknown(ctx, "", "", 10); err != nil || len(keys) != 1 {
			t.Errorf("ListUnknown = %q, %v; want the record once", keys, err)
		}
	}},
	{"release", claimed, func(s *redisstore.Store) (bool, error) {
		return s.Release(ctx, "k", "owner")
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, "", "", "")
	}},
	{"reclaim", func(t *testing.T, s *redisstore.Store) {
		claimed(t, s)
		if ok, err := s.MarkUnknown(ctx, "k", "owner", []byte("unknown"), time.Hour); !ok || err != nil {
			t.Fatalf("MarkUnknown = %v, %v", ok, err)
		}
	}, func(s *redisstore.Store) (bool, error) {
		return s.Reclaim(ctx, "k", "owner", "new owner", []byte("reclaimed"), time.Minute, time.Hour)
	}, func(t *testing.T, s *redisstore.Store) {
		wantStored(t, s, record.StateInProgress, "reclaimed", "")
	}},
}

// claimed claims k for owner.
func claimed(t *testing.T, s *redisstore.Store) {
	t.Helper()
	if ok, _, _, err := s.Claim(ctx, "k", "owner", []byte("claim"), time.Minute, time.Hour); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
}

// wantStored fails unless the record k has state and the parts claim and settle.
func wantStored(t *testing.T, s *redisstore.Store, state, claim, settle string) {
	t.Helper()
	got, stored, err := s.Get(ctx, "k")
	if err != nil || got != state || string(stored.Claim) != claim || string(stored.Settle) != settle {
		t.Errorf("Get = %q, %q, %q, %v; want %q, %q, %q", got, stored.Claim, stored.Settle, err, state, claim, settle)
	}
}

// TestLostReplies (case C14, docs/guarantees.md#lost-replies): for each transition, on one Redis
// and on Redis Cluster, a fault proxy lets the transition's script reach Redis and loses its
// reply, by closing the connection (go-redis reads EOF) or by holding the reply past the client's
// read timeout; go-redis sends the script again, as the gateway runs it (MaxRetries 3,
// cmd/idemgateway/redis.go). The copy answers as the first run did for the same owner (claimed,
// ok: nothing refused as another owner's), and the record is as one run leaves it. The same with
// Options.AutoPipeline, where the lost reply is a batch's.
func TestLostReplies(t *testing.T) {
	t.Parallel()
	topologies := []struct {
		name  string
		start func(t *testing.T) proxied
		auto  bool
	}{{"redis", proxiedRedis, false}, {"cluster", proxiedCluster, false},
		{"redis-auto-pipelined", proxiedRedis, true}, {"cluster-auto-pipelined", proxiedCluster, true}}
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel()
			pt := topo.start(t)
			for _, tc := range lostReplyCases {
				for _, fault := range []faultproxy.Fault{faultproxy.Close, faultproxy.Stall} {
					t.Run(tc.op+"/"+fault.String(), func(t *testing.T) {
						t.Parallel()
						s, err := redisstore.New(pt.client(), redisstore.Options{Prefix: subtestPrefix(t), AutoPipeline: topo.auto})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = s.Close() })
						if tc.setup != nil {
							tc.setup(t, s)
						}
						// Every script is loaded, so that the faulted one goes as EVALSHA, once.
						if err := redisstore.LoadScripts(ctx, pt.raw); err != nil {
							t.Fatal(err)
						}
						rule := faultproxy.NewRule(fault, scriptOf(tc.op, redisstore.RedisKey(s, "k")))
						for _, p := range pt.proxies {
							p.Add(rule)
						}
						ok, err := tc.do(s)
						if err != nil || !ok {
							t.Errorf("%s with its reply lost (%s) = %v, %v; want true, the first run's answer", tc.op, fault, ok, err)
						}
						if !rule.Lost() || rule.Matched() != 2 {
							t.Fatalf("the proxy lost a reply: %v, and saw the script %d times; want true, 2 (the first run and go-redis's copy)", rule.Lost(), rule.Matched())
						}
						tc.check(t, s)
					})
				}
			}
		})
	}
}

// TestAutoPipelinedCallEndsWithItsContext: a stalled batch of the auto-pipeliner holds its calls
// until the read timeout and go-redis's copies after it; a Claim through it still ends when its
// context does, with the context's error, not seconds later with a claim that may have outlived
// its lease (the chaos suite's double effect, before eval bounded the call). The claim landed:
// its owner's release frees it, as the gateway releases an orphaned claim.
func TestAutoPipelinedCallEndsWithItsContext(t *testing.T) {
	t.Parallel()
	pt := proxiedRedis(t)
	// The reply stalls, and go-redis waits out its read timeout (five seconds here, fifty times the
	// call's context) before it sends a copy on a new connection.
	const readTimeout = 5 * time.Second
	client := redis.NewClient(&redis.Options{Addr: pt.proxies[0].Addr(), MaxRetries: 3, ReadTimeout: readTimeout, ContextTimeoutEnabled: true})
	s, err := redisstore.New(client, redisstore.Options{AutoPipeline: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := redisstore.LoadScripts(ctx, pt.raw); err != nil {
		t.Fatal(err)
	}
	pt.proxies[0].LoseReply(faultproxy.Stall, scriptOf("claim", redisstore.RedisKey(s, "k")))
	callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, err = s.Claim(callCtx, "k", "owner", []byte("p"), time.Minute, time.Minute)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took >= readTimeout {
		t.Fatalf("Claim with a 100 ms context through a stalled batch = %v after %s; want the deadline's error, not the read timeout's (%s)", err, took, readTimeout)
	}
	eventually.True(t, "the claim landed", func() bool { state, _, _ := s.Get(ctx, "k"); return state == record.StateInProgress })
	if ok, err := s.Release(ctx, "k", "owner"); !ok || err != nil {
		t.Fatalf("Release by the owner of the claim that landed = %v, %v", ok, err)
	}
}

// TestC14LostRepliesThroughTheGateway (case C14): a gateway on one Redis behind a fault proxy, as
// cmd/idemgateway builds its client but for a read timeout short enough to stall within the
// store timeout. The claim's reply, then the commit's, is lost, by a closed connection and by a
// stall: each request executes once (Up×1) and answers 201, a retry replays, and nothing is logged
// at error (no commit refused as a lost lease).
func TestC14LostRepliesThroughTheGateway(t *testing.T) {
	t.Parallel()
	pt := proxiedRedis(t)
	var calls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+upstream.URL+`}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(pt.client(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var logs testlog.Buffer
	gw, err := gateway.New(cfg, s, gateway.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)
	send := func(key string) (status int, decision string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/tickets", strings.NewReader(`{"title":"`+key+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Idempotency-Decision")
	}
	if err := redisstore.LoadScripts(ctx, pt.raw); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"claim", "commit"} {
		for _, fault := range []faultproxy.Fault{faultproxy.Close, faultproxy.Stall} {
			key := op + "-" + fault.String()
			rkey := redisstore.RedisKey(s, record.ScopeKey{Tenant: "default", Tool: "create_ticket", Key: key}.String())
			rule := pt.proxies[0].LoseReply(fault, scriptOf(op, rkey))
			before := calls.Load()
			if status, decision := send(key); status != http.StatusCreated || decision != gateway.DecisionExecute {
				t.Errorf("%s's reply lost (%s): %d, %q; want 201, execute", op, fault, status, decision)
			}
			if !rule.Lost() || rule.Matched() != 2 {
				t.Errorf("%s's reply lost (%s): lost %v, script seen %d times; want true, 2", op, fault, rule.Lost(), rule.Matched())
			}
			if status, decision := send(key); status != http.StatusCreated || decision != gateway.DecisionReplay {
				t.Errorf("retry after the %s's reply was lost (%s): %d, %q; want 201, replay", op, fault, status, decision)
			}
			if n := calls.Load() - before; n != 1 {
				t.Errorf("%s's reply lost (%s): the upstream was called %d times, want 1", op, fault, n)
			}
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}
