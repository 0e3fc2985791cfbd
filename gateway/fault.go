package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/server"
)

// upstreamFault is the kind of an upstream exchange that failed: all that a client's problem and a
// receipt's detail say of it. The transport's own error names hosts, addresses and DNS resolvers,
// and quotes the upstream's bytes back; only the log line carries it
// (docs/security.md#error-details). It wraps problem.ErrUpstream: 502 upstream-failed.
type upstreamFault string

const (
	faultUnreachable upstreamFault = "upstream unreachable"
	faultBroken      upstreamFault = "upstream connection broke before its response was complete"
	faultMalformed   upstreamFault = "upstream sent a malformed response"
	faultSwitched    upstreamFault = "upstream switched protocols (101) on a request that asked for no upgrade"
	faultBodyBroke   upstreamFault = "upstream response body broke after the upstream committed (the receipt is stored without it)"
)

func (f upstreamFault) Error() string { return string(f) }
func (f upstreamFault) Unwrap() error { return problem.ErrUpstream }

// faultOf is what a client is told of err, the failure of an upstream exchange whose connection
// was obtained or not (connected): a fault the gateway named itself (an upstreamFault in err's
// chain), a streamed body that fell behind the minimum rate, a streamed body over max_body_bytes
// (problem.ErrBodyTooLarge), a timeout (problem.ErrUpstreamTimeout,
// with the upstream's timeout), or the kind of a transport error.
func faultOf(err error, connected bool, timeout time.Duration) error {
	var (
		named    upstreamFault
		tooLarge *http.MaxBytesError
		slow     *server.SlowBodyError
	)
	switch {
	case errors.As(err, &named):
		return named
	case errors.As(err, &slow): // the client's own body, not the upstream (docs/security.md#deadlines)
		return fmt.Errorf("%w: %w", problem.ErrUpstream, slow)
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: more than %d bytes", problem.ErrBodyTooLarge, tooLarge.Limit)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w after %s", problem.ErrUpstreamTimeout, timeout)
	case !connected:
		return faultUnreachable
	case malformed(err):
		return faultMalformed
	default:
		return faultBroken
	}
}

// malformed reports whether err is net/http's refusal of a response it could not parse (RFC 9112
// §2, §6): a bad status line or header line, conflicting Content-Length, or an unknown transfer
// coding. Go gives these no type but textproto's, so the rest is told by message.
func malformed(err error) bool {
	var perr textproto.ProtocolError
	if errors.As(err, &perr) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"malformed ", "unsupported transfer encoding", "multiple Content-Length", "bad Content-Length"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
