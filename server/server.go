// Package server builds the listeners' http.Server (New) and holds each connection to the limits
// of docs/security.md#deadlines: the size and time of a request's headers, a body or an answer
// that keeps the gateway waiting only as long as its pace allows, and idle keep-alive connections.
// Both of the idemgateway command's listeners use it.
package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Defaults of Limits (docs/security.md#deadlines).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultMinRate           = 4 << 10  // bytes per second
	DefaultMaxHeaderBytes    = 64 << 10 // 64 KiB
	DefaultIdleTimeout       = 2 * time.Minute
)

// Limits bound how long, and with how much, one client connection can hold a listener
// (docs/security.md#deadlines). The zero value of a field means its default; a negative one is an
// error of New.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's line and headers.
	// Default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// BodyTimeout and MinRate bound the reading of a request body: the body may keep the gateway
	// waiting BodyTimeout, plus one second for every MinRate bytes received so far. Only the time
	// spent waiting for the client counts (not the time an upstream takes to accept a streamed
	// body). A body sent steadily at MinRate or faster is never cut, whatever its size; one that
	// falls behind is answered 400 (or, streamed, the exchange fails) and its connection closed.
	// Default DefaultBodyTimeout.
	BodyTimeout time.Duration
	// WriteTimeout and MinRate bound the writing of an answer in the same way: it may keep the
	// gateway waiting WriteTimeout, plus one second for every MinRate bytes the connection has
	// taken so far (writes are made in pieces of at most 32 KiB, each under a deadline of its
	// own). A client that reads steadily at MinRate or faster is never cut, however long the
	// download; one that stops reading has its connection closed. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MinRate is the slowest transfer, in bytes per second, that BodyTimeout and WriteTimeout
	// wait for beyond their allowance. Default DefaultMinRate.
	MinRate int64
	// MaxHeaderBytes bounds a request's line and headers (net/http adds 4 KiB of slack); a request
	// over it gets 431 (RFC 6585 §5). Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// IdleTimeout closes a keep-alive connection that has waited this long for its next request.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// withDefaults returns l with its zero fields set to their defaults, or an error naming every
// negative field.
func (l Limits) withDefaults() (Limits, error) {
	var errs []error
	duration := func(name string, d *time.Duration, def time.Duration) {
		switch {
		case *d < 0:
			errs = append(errs, fmt.Errorf("server: Limits.%s %s is negative", name, *d))
		case *d == 0:
			*d = def
		}
	}
	duration("ReadHeaderTimeout", &l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	duration("BodyTimeout", &l.BodyTimeout, DefaultBodyTimeout)
	duration("WriteTimeout", &l.WriteTimeout, DefaultWriteTimeout)
	duration("IdleTimeout", &l.IdleTimeout, DefaultIdleTimeout)
	switch {
	case l.MinRate < 0:
		errs = append(errs, fmt.Errorf("server: Limits.MinRate %d is negative", l.MinRate))
	case l.MinRate == 0:
		l.MinRate = DefaultMinRate
	}
	switch {
	case l.MaxHeaderBytes < 0:
		errs = append(errs, fmt.Errorf("server: Limits.MaxHeaderBytes %d is negative", l.MaxHeaderBytes))
	case l.MaxHeaderBytes == 0:
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l, errors.Join(errs...)
}

// New returns the http.Server that serves h under l: the proxy listener and the admin listener of
// the idemgateway command are both built with it. The request body and answer deadlines are set
// per request (http.ResponseController), since a fixed ReadTimeout or WriteTimeout would cut a
// large upload or a long download that is slow but steady. An error names every negative field of l.
func New(h http.Handler, l Limits) (*http.Server, error) {
	l, err := l.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &http.Server{
		Handler:           &deadlines{next: h, limits: l},
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		IdleTimeout:       l.IdleTimeout,
	}
	return s, nil
}
