package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/faultproxy"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

var ctx = context.Background()

// command matches the commands named name (any case) whose first argument is arg.
func command(name, arg string) func(args [][]byte) bool {
	return func(args [][]byte) bool {
		return len(args) >= 2 && strings.EqualFold(string(args[0]), name) && string(args[1]) == arg
	}
}

// newClient returns a client of addr that never sends a command again and gives up reading after
// readTimeout, closed when the test ends.
func newClient(t *testing.T, addr string, protocol int, readTimeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol, MaxRetries: -1, ReadTimeout: readTimeout})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLoseReply: through the proxy, commands and their replies pass unchanged (RESP2 and RESP3,
// pipelines, large values); a rule lets the first command it matches reach the server and loses
// its reply, by closing the connection (the client reads EOF) or by holding it (the client's read
// times out); the server has run the command; the next command it matches passes.
func TestLoseReply(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	direct := newClient(t, srv.Addr(), 3, 0)
	for _, protocol := range []int{2, 3} {
		for _, fault := range []faultproxy.Fault{faultproxy.Close, faultproxy.Stall} {
			t.Run(fmt.Sprintf("%s/RESP%d", fault, protocol), func(t *testing.T) {
				p := faultproxy.Start(t, srv.Addr())
				c := newClient(t, p.Addr(), protocol, 300*time.Millisecond)
				key := t.Name()
				big := strings.Repeat("x\r\n", 100_000)
				if err := c.Set(ctx, key+":big", big, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if got := c.Get(ctx, key+":big").Val(); got != big {
					t.Fatalf("GET through the proxy: %d bytes, want %d", len(got), len(big))
				}
				if got := c.HGetAll(ctx, "none").Val(); len(got) != 0 { // a map in RESP3
					t.Fatalf("HGETALL = %v", got)
				}

				rule := p.LoseReply(fault, command("incr", key))
				err := c.Incr(ctx, key).Err()
				switch fault {
				case faultproxy.Close:
					if !errors.Is(err, io.EOF) {
						t.Errorf("INCR with its reply lost by close: %v, want EOF", err)
					}
				case faultproxy.Stall:
					var ne net.Error
					if !errors.As(err, &ne) || !ne.Timeout() {
						t.Errorf("INCR with its reply stalled: %v, want a timeout", err)
					}
				}
				if got := direct.Get(ctx, key).Val(); got != "1" {
					t.Errorf("the server's value after the lost reply = %q, want 1: it ran the command", got)
				}
				if !rule.Lost() || rule.Matched() != 1 {
					t.Errorf("rule: lost %v, matched %d; want true, 1", rule.Lost(), rule.Matched())
				}
				// The rule lost one reply: the command sent again passes, on a new connection.
				if n, err := c.Incr(ctx, key).Result(); n != 2 || err != nil {
					t.Errorf("INCR sent again = %d, %v; want 2", n, err)
				}
				if rule.Matched() != 2 {
					t.Errorf("rule matched %d commands, want 2", rule.Matched())
				}
			})
		}
	}
}

// TestLoseReplyInPipeline: in a pipeline, the replies before the lost one reach the client; the
// lost one and those after it do not. The server ran the command whose reply was lost; a command
// after it may or may not have reached the server before the connection closed, as with a real
// connection that drops.
func TestLoseReplyInPipeline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	p := faultproxy.Start(t, srv.Addr())
	c := newClient(t, p.Addr(), 3, 300*time.Millisecond)
	p.LoseReply(faultproxy.Close, command("incr", "second"))
	pipe := c.Pipeline()
	first := pipe.Incr(ctx, "first")
	second := pipe.Incr(ctx, "second")
	third := pipe.Incr(ctx, "third")
	_, _ = pipe.Exec(ctx)
	// go-redis marks every command of a failed pipeline with its error, but keeps what it read.
	if n := first.Val(); n != 1 {
		t.Errorf("first reply = %d; want 1: it came before the lost one", n)
	}
	if second.Val() != 0 || third.Val() != 0 || second.Err() == nil || third.Err() == nil {
		t.Errorf("replies after the lost one: %d, %v and %d, %v; want none", second.Val(), second.Err(), third.Val(), third.Err())
	}
	direct := newClient(t, srv.Addr(), 3, 0)
	if got := direct.MGet(ctx, "first", "second").Val(); len(got) != 2 || got[0] != "1" || got[1] != "1" {
		t.Errorf("values on the server = %v; want the first command and the one whose reply was lost run", got)
	}
}

// TestReadValue: the reply reader reads every RESP3 type, and answers a push apart.
func TestReadValue(t *testing.T) {
	t.Parallel()
	stream := strings.Join([]string{
		"+OK\r\n", "-ERR x\r\n", ":7\r\n", "_\r\n", "#t\r\n", ",1.5\r\n", "(12345678901234567890\r\n",
		"$3\r\na\r\n\r\n", "$-1\r\n", "!3\r\nERR\r\n", "=7\r\ntxt:abc\r\n",
		"*2\r\n:1\r\n$1\r\nx\r\n", "*-1\r\n", "~1\r\n+a\r\n", "%1\r\n+k\r\n*1\r\n:1\r\n",
		"|1\r\n+ttl\r\n:3\r\n+value\r\n", ">2\r\n+message\r\n+x\r\n",
	}, "")
	replies, pushes, err := faultproxy.SplitReplies([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if replies != 16 || pushes != 1 {
		t.Errorf("%d replies and %d pushes, want 16 and 1", replies, pushes)
	}
	if _, _, err := faultproxy.SplitReplies([]byte("?what\r\n")); err == nil {
		t.Error("an unknown type byte read as a reply")
	}
	if _, _, err := faultproxy.SplitReplies([]byte("$5\r\nab\r\n")); err == nil {
		t.Error("a cut-off bulk string read as a reply")
	}
}
