package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// conn is a minimal RESP2 client: enough for the helpers' readiness probes (INFO, CLUSTER INFO,
// SENTINEL ...). The tests themselves use go-redis.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

// dial connects to addr, over TLS when tlsConfig is not nil, and authenticates with password when
// it is not empty. Every read and write is bounded by timeout.
func dial(addr string, tlsConfig *tls.Config, password string, timeout time.Duration) (*conn, error) {
	d := &net.Dialer{Timeout: timeout}
	var c net.Conn
	var err error
	if tlsConfig != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, tlsConfig)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	cn := &conn{c: c, r: bufio.NewReader(c)}
	if password != "" {
		if _, err := cn.do("AUTH", password); err != nil {
			c.Close()
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	return cn, nil
}

func (c *conn) Close() error { return c.c.Close() }

// do sends one command and reads its reply: a string (simple or bulk; "" for a nil bulk), an
// int64, or a []any; an error reply is returned as a replyError.
func (c *conn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return nil, err
	}
	return c.read()
}

// replyError is an error reply of the server, such as "-NOAUTH Authentication required.".
type replyError string

func (e replyError) Error() string { return string(e) }

func (c *conn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, replyError(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return []any(nil), err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				var re replyError
				if !errors.As(err, &re) {
					return nil, err
				}
				out[i] = re
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// infoField returns the value of field in an INFO-style reply ("field:value" lines).
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}

// pairs turns a flat reply [k1 v1 k2 v2 ...] of strings into a map.
func pairs(reply any) map[string]string {
	m := map[string]string{}
	list, _ := reply.([]any)
	for i := 0; i+1 < len(list); i += 2 {
		k, _ := list[i].(string)
		v, _ := list[i+1].(string)
		m[k] = v
	}
	return m
}
