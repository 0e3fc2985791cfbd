package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/server"
)

// checkLimits reports every connection or body limit that is not positive, an
// IDEMGATEWAY_MAX_INFLIGHT_BYTES other than 0 under minInflightBytes, and an
// IDEMGATEWAY_ADMIN_HOSTS entry that is not a host name.
func (s *settings) checkLimits() error {
	var problems []string
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"IDEMGATEWAY_READ_HEADER_TIMEOUT", s.ReadHeaderTimeout}, {"IDEMGATEWAY_BODY_TIMEOUT", s.BodyTimeout},
		{"IDEMGATEWAY_WRITE_TIMEOUT", s.WriteTimeout}, {"IDEMGATEWAY_IDLE_TIMEOUT", s.IdleTimeout},
	} {
		if d.value <= 0 {
			problems = append(problems, fmt.Sprintf("%s %s is not positive", d.name, d.value))
		}
	}
	if s.MinTransferRate <= 0 {
		problems = append(problems, fmt.Sprintf("IDEMGATEWAY_MIN_TRANSFER_RATE %d is not positive: want bytes per second", s.MinTransferRate))
	}
	if s.MaxHeaderBytes <= 0 {
		problems = append(problems, fmt.Sprintf("IDEMGATEWAY_MAX_HEADER_BYTES %d is not positive", s.MaxHeaderBytes))
	}
	if s.MaxBodyValues <= 0 {
		problems = append(problems, fmt.Sprintf("IDEMGATEWAY_MAX_BODY_VALUES %d is not positive", s.MaxBodyValues))
	}
	if s.MaxInflightBytes != 0 && s.MaxInflightBytes < minInflightBytes {
		problems = append(problems, fmt.Sprintf("IDEMGATEWAY_MAX_INFLIGHT_BYTES %d is under %d (1 MiB): set at least 1 MiB, or 0 for a quarter of the memory limit", s.MaxInflightBytes, minInflightBytes))
	}
	if _, err := admin.CheckHost(http.NotFoundHandler(), s.AdminListen, s.AdminHosts); err != nil {
		problems = append(problems, "IDEMGATEWAY_ADMIN_HOSTS: "+err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// limits are the connection limits of both listeners.
func (s *settings) limits() server.Limits {
	return server.Limits{
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		BodyTimeout:       s.BodyTimeout,
		WriteTimeout:      s.WriteTimeout,
		MinRate:           s.MinTransferRate,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		IdleTimeout:       s.IdleTimeout,
	}
}

// servers builds the proxy listener's server for gw and the admin listener's, the admin API over
// store and the metrics of reg, whose handler answers only for the hosts that name it
// (admin.CheckHost) and whose /readyz fails once stopping is closed, both under the settings'
// limits.
func (s *settings) servers(gw *gateway.Gateway, store record.Store, reg *prometheus.Registry, log *slog.Logger, stopping <-chan struct{}) (proxy, adminServer *http.Server, err error) {
	adminHandler, err := admin.CheckHost(admin.Handler(admin.Options{
		Store: store, Pipeline: gw, Token: s.AdminToken, Metrics: reg, Logger: log, Stopping: stopping,
	}), s.AdminListen, s.AdminHosts)
	if err != nil {
		return nil, nil, err
	}
	if proxy, err = server.New(gw, s.limits()); err != nil {
		return nil, nil, err
	}
	proxy.RegisterOnShutdown(gw.EndStreams) // else MCP clients' GET streams hold Shutdown to its deadline
	if adminServer, err = server.New(adminHandler, s.limits()); err != nil {
		return nil, nil, err
	}
	return proxy, adminServer, nil
}
