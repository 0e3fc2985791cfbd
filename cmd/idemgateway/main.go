// Command idemgateway is the idempotency gateway for AI-agent tools: an HTTP reverse proxy that
// executes each side-effecting tool call once, replays its receipt to every retry, and refuses a
// reused key with a different effect. See README.md and docs/contract.md.
//
//	idemgateway [serve]          run the gateway (the default)
//	idemgateway validate         check the routes file; print every problem; exit 1 on any
//	idemgateway fingerprint      print the canonical document, fingerprint and key of a request
//	idemgateway records          get, resolve, delete and list records through the admin API
//	idemgateway version          print the version
//
// Settings come from IDEMGATEWAY_* environment variables; a flag of the same name overrides.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpfront"
	"github.com/idemgateway/idemgateway/routes"
)

// The front ends of the routes of kinds other than http (gateway.Options.Fronts), and how
// `idemgateway fingerprint` reads their calls (gateway.Explain).
var (
	fronts  = map[routes.Kind]gateway.NewFront{routes.KindMCP: mcpfront.New}
	readers = map[routes.Kind]gateway.CallReader{routes.KindMCP: mcpfront.ReadCall}
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp): // -h: the command's flag set printed its usage
	case err != nil:
		fmt.Fprintln(os.Stderr, "idemgateway:", err)
		os.Exit(1)
	}
}

// usage lists the subcommands (docs/operations.md#subcommands).
const usage = `usage: idemgateway [serve] [flags]           run the gateway (the default)
       idemgateway validate [FILE] [flags]  check a routes file (FILE, or -routes), print every problem
       idemgateway fingerprint [flags]      what the gateway makes of one request
       idemgateway records [flags] ...      the admin API's records from the command line
       idemgateway version
flags: idemgateway -h, idemgateway fingerprint -h, idemgateway records help; settings: docs/configuration.md`

func run(args []string) error {
	cmd := "serve"
	switch {
	case len(args) > 0 && args[0] == "fingerprint":
		return fingerprint(args[1:], os.Stdin, os.Stdout)
	case len(args) > 0 && args[0] == "records":
		return records(args[1:], os.Stdout)
	case len(args) > 0 && args[0] == "help":
		fmt.Println(usage)
		return nil
	case len(args) > 1 && args[0] == "validate" && !strings.HasPrefix(args[1], "-"):
		// validate FILE: the file as -routes, which flags after it may still set.
		cmd, args = "validate", append([]string{"-routes", args[1]}, args[2:]...)
	case len(args) > 0 && (args[0] == "serve" || args[0] == "validate" || args[0] == "version"):
		cmd, args = args[0], args[1:]
	}
	s, err := loadSettings(args)
	if err != nil {
		return err
	}
	switch cmd {
	case "version":
		fmt.Println("idemgateway", version)
		return nil
	case "validate":
		return validate(s.Routes, os.Stdout)
	}
	return serve(s)
}

// validate prints every problem of the routes file at path to w, or that it is ok.
func validate(path string, w io.Writer) error {
	if _, err := routes.Load(path); err != nil {
		fmt.Fprintln(w, err)
		return errors.New("routes file is not valid")
	}
	fmt.Fprintf(w, "%s: ok\n", path)
	return nil
}

func serve(s *settings) error {
	log, err := s.logger()
	if err != nil {
		return err
	}
	inflight := inflightBytes(log, s.MaxInflightBytes, setGCPolicy(log, memlimit.FromCgroup))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := routes.Load(s.Routes)
	if err != nil {
		return err
	}
	var timeouts defaultGrace
	timeouts.see(cfg)
	watcher := routes.NewWatcher(s.Routes)
	tracerProvider, shutdownTracing, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer shutdownTracing(context.Background())
	store, closeStore, err := s.openStore(log)
	if err != nil {
		return err
	}
	defer closeStore()
	reg := gateway.NewRegistry()
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: log, TracerProvider: tracerProvider, Metrics: reg,
		MaxBodyValues: s.MaxBodyValues, MaxInflightBytes: inflight, Fronts: fronts})
	if err != nil {
		return err
	}

	go watcher.Run(ctx, s.RoutesPoll, hangups(ctx), func(cfg *routes.Config, err error) {
		if err == nil {
			err = gw.Reload(cfg)
		}
		if err != nil {
			log.Error("routes file refused; the routes in force stay", "err", err)
			return
		}
		timeouts.see(cfg)
		log.Info("routes reloaded", "routes", len(cfg.Routes))
	})

	proxy, admin, err := s.servers(gw, store, reg, log, ctx.Done())
	if err != nil {
		return err
	}
	proxyLn, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", s.AdminListen)
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- proxy.Serve(proxyLn) }()
	go func() { errs <- admin.Serve(adminLn) }()
	log.Info("listening", "proxy", proxyLn.Addr().String(), "admin", adminLn.Addr().String(),
		"routes", s.Routes, "store", s.storeName(), "compress_min_bytes", s.CompressMinBytes, "encrypted", s.EncryptionKey != "",
		"max_inflight_bytes", inflight, "version", version)

	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	grace := cmp.Or(s.ShutdownGrace, timeouts.get())
	log.Info("shutting down", "grace", grace.String())
	err = drain(proxy, gw, grace, log)
	// Receipts the store failed to take are tried once more; what it still fails reads
	// outcome_unknown once its lease lapses.
	switch stored, left := gw.SettlePending(context.Background()); {
	case left > 0:
		log.Warn("pending receipts not stored at shutdown: their records read outcome_unknown once their leases lapse", "stored", stored, "left", left)
	case stored > 0:
		log.Info("pending receipts stored at shutdown", "stored", stored)
	}
	actx, cancel := context.WithTimeout(context.Background(), afterCut)
	defer cancel()
	if admin.Shutdown(actx) != nil { // a request of the admin listener outlasted afterCut
		_ = admin.Close()
	}
	return err
}

// hangups turns SIGHUP into reload requests until ctx ends.
func hangups(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	now := make(chan struct{})
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case now <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return now
}
