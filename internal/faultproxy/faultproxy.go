// Package faultproxy is a TCP proxy for tests that loses replies on command: it sits between a
// Redis client and a real redis-server, lets a chosen command through to the server, and then loses
// the server's reply to it, by closing the client's connection (the client reads EOF) or by holding
// the reply for good (the client's read times out). The server has run the command; the client does
// not know it, and sends it again if it retries. That is case C14 of docs/cases.md, a lost reply,
// which the store's transitions must survive (docs/guarantees.md#lost-replies).
//
// The proxy reads the RESP protocol (RESP2 and RESP3) in both directions, so that it knows which
// reply answers which command, pipelines included: replies come back in the order of their
// commands, and push messages (RESP3 '>') answer none. A Rule says which command's reply to lose;
// it loses one, the first command it matches, on any proxy it was added to, so that one Rule can
// cover the nodes of a Redis Cluster (one proxy per node, and a dialer that maps each node's address
// to its proxy: cluster clients learn node addresses from the cluster, not from the proxy).
package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Fault is how a Rule loses a reply.
type Fault int

const (
	// Close closes the client's connection, and the proxy's to the server, once the server's reply
	// to the command has arrived at the proxy (so the server has run it): the client reads EOF
	// where the reply should be.
	Close Fault = iota + 1
	// Stall keeps the client's connection open and forwards nothing more on it, the reply
	// included, until the client closes it: the client's read times out.
	Stall
)

// String names the fault: "close" or "stall".
func (f Fault) String() string {
	switch f {
	case Close:
		return "close"
	case Stall:
		return "stall"
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// Rule loses the reply of the first command it matches, on any of the proxies it was added to,
// and counts every command it matches, before and after. It is safe for concurrent use.
type Rule struct {
	fault Fault
	match func(args [][]byte) bool

	mu      sync.Mutex
	matched int
	lost    bool
}

// NewRule returns a Rule that loses, by fault, the reply of the first command for which match
// returns true. match is called with the command's arguments (its name first, as the client sent
// it) from the proxies' goroutines, and must not keep them.
func NewRule(fault Fault, match func(args [][]byte) bool) *Rule {
	return &Rule{fault: fault, match: match}
}

// Matched returns how many commands the rule matched: the one whose reply it lost, and those
// after it (a client's copy of the command, for instance).
func (r *Rule) Matched() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.matched
}

// Lost reports whether the rule lost a reply: whether a command it matched was answered by the
// server, and the answer lost.
func (r *Rule) Lost() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// take reports whether the rule matches args, and the fault to apply to its reply: 0 when it
// matches but has lost a reply already, or was taken by another command that is still waiting
// for its reply.
func (r *Rule) take(args [][]byte) (matched bool, fault Fault) {
	if !r.match(args) {
		return false, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.matched++
	if r.matched == 1 {
		return true, r.fault
	}
	return true, 0
}

// done records that the rule's reply was lost.
func (r *Rule) done() {
	r.mu.Lock()
	r.lost = true
	r.mu.Unlock()
}

// Proxy is a TCP proxy to one server. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	raw    bool // forward bytes unread (StartRaw): any protocol, and only Cut's faults

	mu     sync.Mutex
	rules  []*Rule
	conns  map[net.Conn]struct{} // both ends of every proxied connection, to close them
	closed bool
	wg     sync.WaitGroup
}

// New starts a proxy to target ("host:port") on a free 127.0.0.1 port.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New for a test: it fails tb when the proxy cannot listen, and closes the proxy when
// the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// StartRaw is Start for a server of any protocol (PostgreSQL's): the proxy forwards bytes without
// reading them, so rules do not apply; Cut breaks its connections.
func StartRaw(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := Start(tb, target)
	p.mu.Lock()
	p.raw = true
	p.mu.Unlock()
	return p
}

// Cut closes every connection the proxy carries now, in both directions, as a network that drops
// them would; the proxy keeps accepting new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Addr returns the proxy's address, "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Add makes the proxy apply r to the commands it forwards from now on.
func (p *Proxy) Add(r *Rule) {
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
}

// LoseReply adds NewRule(fault, match) and returns it.
func (p *Proxy) LoseReply(fault Fault, match func(args [][]byte) bool) *Rule {
	r := NewRule(fault, match)
	p.Add(r)
	return r
}

// Close stops listening, closes every proxied connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.mu.Lock()
		raw := p.raw
		p.mu.Unlock()
		if raw {
			p.wg.Add(2)
			go p.copy(client, server)
			go p.copy(server, client)
			continue
		}
		c := &conn{p: p, client: client, server: server, faults: map[int]lostReply{}}
		p.wg.Add(2)
		go c.requests()
		go c.replies()
	}
}

// track registers the two ends of a new connection, or closes them and returns false when the
// proxy is closed.
func (p *Proxy) track(ends ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range ends {
			_ = c.Close()
		}
		return false
	}
	for _, c := range ends {
		p.conns[c] = struct{}{}
	}
	return true
}

// copy forwards the bytes of a raw connection from src to dst until either end closes, then
// closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.untrack(dst, src)
}

// untrack closes the two ends of a connection and forgets them.
func (p *Proxy) untrack(ends ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range ends {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// match applies the proxy's rules to a command: the fault to apply to its reply, and the rule to
// tell once it is lost (nil: none). Every rule that matches counts the command.
func (p *Proxy) match(args [][]byte) (lostReply, bool) {
	p.mu.Lock()
	rules := append([]*Rule(nil), p.rules...)
	p.mu.Unlock()
	var chosen lostReply
	for _, r := range rules {
		if matched, fault := r.take(args); matched && fault != 0 && chosen.rule == nil {
			chosen = lostReply{fault: fault, rule: r}
		}
	}
	return chosen, chosen.rule != nil
}

// lostReply is the fault a rule chose for the reply of one command.
type lostReply struct {
	fault Fault
	rule  *Rule
}

// conn is one proxied connection: requests forwards the client's commands, replies the server's
// replies, and both count them, so that the reply of the n-th command is the n-th reply.
type conn struct {
	p              *Proxy
	client, server net.Conn

	mu     sync.Mutex
	sent   int               // commands forwarded so far
	faults map[int]lostReply // by the index of the command whose reply is to be lost
}

// requests reads the client's commands and forwards each to the server, first noting the fault of
// a command a rule matched.
func (c *conn) requests() {
	defer c.p.wg.Done()
	defer c.p.untrack(c.client, c.server)
	rd := bufio.NewReader(c.client)
	for {
		raw, args, err := readCommand(rd)
		if err != nil {
			return
		}
		c.mu.Lock()
		if f, ok := c.p.match(args); ok {
			c.faults[c.sent] = f
		}
		c.sent++
		c.mu.Unlock()
		if _, err := c.server.Write(raw); err != nil {
			return
		}
	}
}

// replies reads the server's replies and forwards each to the client, until the reply of a
// command with a fault: Close closes both ends, Stall forwards nothing more (the server's replies
// are read and dropped) until requests sees the client close.
func (c *conn) replies() {
	defer c.p.wg.Done()
	rd := bufio.NewReader(c.server)
	stalled := false
	for n := 0; ; {
		raw, push, err := readReply(rd)
		if err != nil {
			c.p.untrack(c.client, c.server)
			return
		}
		if !push {
			c.mu.Lock()
			f, ok := c.faults[n]
			delete(c.faults, n)
			c.mu.Unlock()
			n++
			if ok {
				f.rule.done()
				if f.fault == Close {
					c.p.untrack(c.client, c.server)
					return
				}
				stalled = true
			}
		}
		if stalled {
			continue
		}
		if _, err := c.client.Write(raw); err != nil {
			c.p.untrack(c.client, c.server)
			return
		}
	}
}

// errProtocol is a byte stream that is not RESP.
var errProtocol = errors.New("faultproxy: not RESP")

// readCommand reads one command from a client: a RESP array of bulk strings, as clients send them,
// or an inline command (one line of words). It returns the command's bytes as read and its
// arguments.
func readCommand(rd *bufio.Reader) (raw []byte, args [][]byte, err error) {
	line, err := readLine(rd)
	if err != nil {
		return nil, nil, err
	}
	raw = line
	if line[0] != '*' {
		return raw, bytes.Fields(bytes.TrimRight(line, "\r\n")), nil
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil || n < 0 {
		return nil, nil, errProtocol
	}
	for range n {
		head, err := readLine(rd)
		if err != nil {
			return nil, nil, err
		}
		if head[0] != '$' {
			return nil, nil, errProtocol
		}
		size, err := strconv.Atoi(string(head[1 : len(head)-2]))
		if err != nil || size < 0 {
			return nil, nil, errProtocol
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, nil, err
		}
		raw = append(append(raw, head...), body...)
		args = append(args, body[:size])
	}
	return raw, args, nil
}

// readReply reads one reply of a server, RESP2 or RESP3, and returns its bytes as read and whether
// it is a push message (RESP3 '>'), which answers no command.
func readReply(rd *bufio.Reader) (raw []byte, push bool, err error) {
	first, err := rd.Peek(1)
	if err != nil {
		return nil, false, err
	}
	push = first[0] == '>'
	raw, err = readValue(rd, nil)
	return raw, push, err
}

// readValue appends one RESP value, and everything it holds, to raw.
func readValue(rd *bufio.Reader, raw []byte) ([]byte, error) {
	line, err := readLine(rd)
	if err != nil {
		return nil, err
	}
	raw = append(raw, line...)
	head := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(': // simple string, error, integer, null, boolean, double, big number
		return raw, nil
	case '$', '!', '=': // bulk string, bulk error, verbatim string; $-1 is RESP2's null
		size, err := strconv.Atoi(head)
		if err != nil || size < -1 {
			return nil, errProtocol
		}
		if size == -1 {
			return raw, nil
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, err
		}
		return append(raw, body...), nil
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute; *-1 is RESP2's null array
		n, err := strconv.Atoi(head)
		if err != nil || n < -1 {
			return nil, errProtocol
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2 // keys and values
		}
		for range n {
			if raw, err = readValue(rd, raw); err != nil {
				return nil, err
			}
		}
		if line[0] == '|' { // an attribute precedes the value it describes
			return readValue(rd, raw)
		}
		return raw, nil
	}
	return nil, errProtocol
}

// readLine reads a line up to and including "\r\n", at least one byte before it.
func readLine(rd *bufio.Reader) ([]byte, error) {
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errProtocol
	}
	return line, nil
}
