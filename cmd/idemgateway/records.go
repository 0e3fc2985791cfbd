package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idemgateway/idemgateway/adminclient"
)

const recordsUsage = `usage:
  idemgateway records get TENANT TOOL KEY
  idemgateway records resolve TENANT TOOL KEY --outcome committed|not_committed [--remote-id ID] [--remote-url URL] [--status N]
  idemgateway records delete TENANT TOOL KEY [--force]
  idemgateway records list [--state outcome_unknown] [--tenant T] [--tool T] [--limit N] [--cursor C]
flags of get, resolve and delete: --credential SCOPE (a route with scope.credential: the receipt's
credential_scope); of every command, before or after it: --admin URL (IDEMGATEWAY_ADMIN_URL,
default http://127.0.0.1:9090); the token is read from IDEMGATEWAY_ADMIN_TOKEN`

// records is `idemgateway records`: the operator's client of the admin records API (docs/contract.md §5).
// It prints the record (or the page of a list) as indented JSON; delete, and resolve with
// not_committed, print nothing. An answer of the API that is not 2xx is returned as
// "records: <status> <title>: <detail>".
func records(args []string, stdout io.Writer) error {
	// --admin, the flag of every command, may come before the command too.
	var lead []string
	for len(args) > 0 && (strings.HasPrefix(args[0], "-admin=") || strings.HasPrefix(args[0], "--admin=") ||
		(args[0] == "-admin" || args[0] == "--admin") && len(args) > 1) {
		n := 1
		if !strings.Contains(args[0], "=") {
			n = 2
		}
		lead, args = append(lead, args[:n]...), args[n:]
	}
	if len(args) == 0 {
		return errors.New("records: a command is required\n" + recordsUsage)
	}
	cmd := args[0]
	switch cmd {
	case "help", "-h", "-help", "--help":
		_, err := io.WriteString(stdout, recordsUsage)
		return err
	}
	fs := flag.NewFlagSet("idemgateway records "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", envOr("IDEMGATEWAY_ADMIN_URL", "http://127.0.0.1:9090"), "admin listener URL")
	var res adminclient.Resolution
	var q adminclient.ListQuery
	nargs := 3
	var credential string
	var force bool
	if cmd != "list" {
		fs.StringVar(&credential, "credential", "", "the record's credential_scope (routes with scope.credential)")
	}
	switch cmd {
	case "get":
	case "delete":
		fs.BoolVar(&force, "force", false, "delete even while the record's call is under way")
	case "resolve":
		fs.StringVar(&res.Outcome, "outcome", "", "committed or not_committed")
		fs.StringVar(&res.RemoteID, "remote-id", "", "the upstream's id of what was created (committed)")
		fs.StringVar(&res.RemoteURL, "remote-url", "", "its URL (committed)")
		fs.IntVar(&res.ResponseStatus, "status", 0, "the status replays answer (committed; default the route's first outcome.committed code, else 200)")
	case "list":
		nargs = 0
		fs.StringVar(&q.State, "state", "outcome_unknown", "the records' state")
		fs.StringVar(&q.Tenant, "tenant", "", "only this tenant")
		fs.StringVar(&q.Tool, "tool", "", "only this tool")
		fs.IntVar(&q.Limit, "limit", 0, "records per page (default: the gateway's)")
		fs.StringVar(&q.Cursor, "cursor", "", "the next_cursor of the previous page")
	default:
		return fmt.Errorf("records: unknown command %q\n%s", cmd, recordsUsage)
	}
	pos, err := parseInterspersed(fs, append(lead, args[1:]...))
	if errors.Is(err, flag.ErrHelp) {
		_, err = io.WriteString(stdout, recordsUsage)
		return err
	}
	if err != nil {
		return fmt.Errorf("records %s: %v\n%s", cmd, err, recordsUsage)
	}
	if len(pos) != nargs {
		return fmt.Errorf("records %s: %d arguments, want %d\n%s", cmd, len(pos), nargs, recordsUsage)
	}
	c, err := adminclient.New(*admin, adminclient.Options{Token: os.Getenv("IDEMGATEWAY_ADMIN_TOKEN")})
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if credential != "" {
		c = c.WithCredential(credential)
	}
	ctx := context.Background()
	var out any
	switch cmd {
	case "get":
		out, err = c.Get(ctx, pos[0], pos[1], pos[2])
	case "delete":
		err = c.Delete(ctx, pos[0], pos[1], pos[2], force)
	case "resolve":
		if res.Outcome != adminclient.OutcomeCommitted && res.Outcome != adminclient.OutcomeNotCommitted {
			return fmt.Errorf("records resolve: --outcome must be committed or not_committed\n%s", recordsUsage)
		}
		rec, rerr := c.Resolve(ctx, pos[0], pos[1], pos[2], res)
		if rec != nil {
			out = rec
		}
		err = rerr
	case "list":
		out, err = c.List(ctx, q)
	}
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if out == nil {
		return nil
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// parseInterspersed parses fs's flags wherever they stand among the positional arguments, which
// it returns; after "--" every argument is positional (a key that starts with "-").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}
