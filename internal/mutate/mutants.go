package main

// Target is one `go test` run: the package (relative to the repository's root, "./gateway") and
// the -run regexp ("^TestX$", "^TestConformance$/^Fencing").
type Target struct{ Pkg, Run string }

// Mutant is one small edit of the product that breaks one behaviour: From, which must occur
// exactly once in File (a path from the repository's root), becomes To. Tests are the targets
// that should catch it, cheapest and likeliest first: the driver stops at the first that fails.
type Mutant struct {
	Name, Behaviour, File, From, To string
	Tests                           []Target
}

// mutants is the list `make mutate` runs. The first group breaks the eight core behaviours of the
// README (issue 11), on both stores where it is store code; the second the behaviours that no test
// guarded at 62d8848. Add a row for every behaviour you add (docs/contributing.md).
var mutants = []Mutant{
	// Atomic claim: of concurrent claims of a free key, one wins.
	{Name: "claim-decides-outside-its-transaction-bolt", Behaviour: "Claim decides on the read-only transaction's view, not on the record in its write transaction: concurrent claims (and a lapsed record) all win",
		File: "boltstore/boltstore.go", From: "r, err := load(b, key, now)\n\t\tswitch {", To: "r, err := found, error(nil) // mutant: the view of the read-only transaction\n\t\tswitch {",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestConformance$/^(ConcurrentClaimsOneWins|LapsedLeaseBecomesUnknownNeverFreed)$"}, {Pkg: "./gateway", Run: "^TestConcurrentDuplicates$"}}},
	{Name: "claim-takes-over-in-progress-redis", Behaviour: "claim.lua claims a live in_progress record again: a duplicate in flight executes too",
		File: "redisstore/scripts/claim.lua", From: "if not rec then", To: "if not rec or rec.state == 'in_progress' then",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestConformance$/^(SecondClaimReturnsStoredRecord|ConcurrentClaimsOneWins)$"}}},

	// Replay without the upstream.
	{Name: "replay-calls-upstream", Behaviour: "a retry of a committed record executes again instead of replaying the receipt",
		File: "gateway/effect.go", From: "case state == StateCommitted:\n\t\t\tx.replay(prev)", To: "case state == StateCommitted:\n\t\t\tx.execute()",
		Tests: []Target{{Pkg: "./gateway", Run: "^TestDecisionMetrics$"}, {Pkg: "./e2e", Run: "^TestContract_CommittedSameFingerprint$"}}},

	// 422 on a changed fingerprint.
	{Name: "changed-fingerprint-replayed", Behaviour: "a known key with another effect fingerprint is not refused with 422: it gets the first request's replay",
		File: "gateway/effect.go", From: "case prev.EffectFingerprint != x.fp:", To: "case false && prev.EffectFingerprint != x.fp:",
		Tests: []Target{{Pkg: "./gateway", Run: "^TestDecisionMetrics$"}, {Pkg: "./e2e", Run: "^TestContract_DifferentFingerprint$"}}},

	// Lease renewal while the upstream call runs.
	{Name: "lease-never-renewed", Behaviour: "the gateway never renews the lease of a call under way: a long call lapses to outcome_unknown",
		File: "gateway/effect.go", From: "x.stopLease = x.keepLease()", To: "x.stopLease = func() {}",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestC02_LeaseRenewedDuringLongCall$"}}},
	{Name: "renew-keeps-lease-bolt", Behaviour: "Renew answers ok but leaves the lease where it was",
		File: "boltstore/boltstore.go", From: "r.leaseUntil = now + millis(lease)\n", To: "",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestConformance$/^RenewExtendsLease$"}}},
	{Name: "renew-keeps-lease-redis", Behaviour: "renew.lua answers 1 but leaves lease_until where it was",
		File: "redisstore/scripts/renew.lua", From: "redis.call('HSET', KEYS[1], 'lease_until', ms(now_ms() + tonumber(ARGV[2])))", To: "-- mutant: lease not extended",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestConformance$/^RenewExtendsLease$"}}},

	// A lapsed lease is never a free key.
	{Name: "lapsed-lease-freed-bolt", Behaviour: "Claim of an in_progress record whose lease lapsed claims it afresh instead of turning it outcome_unknown",
		File: "boltstore/boltstore.go", From: "case r == nil:", To: "case r == nil || r.lapsed(now):",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestConformance$/^LapsedLeaseBecomesUnknownNeverFreed$"}, {Pkg: "./e2e", Run: "^TestKill9InFlight$"}}},
	{Name: "lapsed-lease-freed-redis", Behaviour: "claim.lua claims an in_progress record whose lease lapsed afresh instead of turning it outcome_unknown",
		File: "redisstore/scripts/claim.lua", From: "if not rec then", To: "if not rec or (rec.state == 'in_progress' and now_ms() >= rec.lease_until) then",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestConformance$/^LapsedLeaseBecomesUnknownNeverFreed$"}}},

	// The receipt is stored before the first byte of the response reaches the client.
	// At 62d8848 this is caught only through races (the race detector, or a test that reads the
	// store just after the response); guarded by issue 11's first-byte test.
	{Name: "commit-after-response", Behaviour: "the receipt is committed asynchronously, while the response is already on its way to the client",
		File: "gateway/proxy.go", From: "\tx.commit()\n", To: "\tgo x.commit()\n",
		Tests: []Target{{Pkg: "./gateway", Run: "^TestReloadKeepsRequestsUnderWay$"}, {Pkg: "./e2e", Run: "^TestContract_KeyNew$"}}},

	// No Set-Cookie (nor any other never-replayed header) is replayed.
	{Name: "receipt-keeps-every-header", Behaviour: "the receipt stores every response header, Set-Cookie included, and replays repeat them",
		File: "gateway/proxy.go", From: "Header: storedHeader(resp.Header, x.rt.Receipt.ReplayHeaders)}", To: "Header: resp.Header.Clone()}",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestC09_SetCookieNotReplayed$"}}},
	{Name: "never-replayed-not-enforced", Behaviour: "storedHeader keeps a header that routes.NeverReplayed names (Set-Cookie) when a route lists it",
		File: "gateway/record.go", From: "ok && !connection[name] && !routes.NeverReplayed(name) {", To: "ok && !connection[name] {",
		Tests: []Target{{Pkg: "./gateway", Run: "^TestStoredHeader$"}}},

	// A stale owner's writes are refused (fencing).
	{Name: "finish-ignores-owner-bolt", Behaviour: "Commit and MarkUnknown settle an in_progress record whoever owns it",
		File: "boltstore/boltstore.go", From: "if !r.ownedInProgress(owner) {\n\t\t\treturn false\n\t\t}\n\t\tr.state, r.payload", To: "if r.state != stateInProgress {\n\t\t\treturn false\n\t\t}\n\t\tr.state, r.payload",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestConformance$/^FencingRefusesOtherOwnersAndStates$"}}},
	{Name: "commit-ignores-owner-redis", Behaviour: "commit.lua commits an in_progress record whoever owns it",
		File: "redisstore/scripts/commit.lua", From: "if not rec or rec.state ~= 'in_progress' or rec.owner ~= ARGV[1] then", To: "if not rec or rec.state ~= 'in_progress' then",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestConformance$/^FencingRefusesOtherOwnersAndStates$"}, {Pkg: "./e2e", Run: "^TestC13_FailoverClaimOnNewPrimary$"}}},

	// The mutants that survived every test at 62d8848 (issue 11).
	{Name: "settle-wakes-no-waiter", Behaviour: "an in-process settle wakes no waiting duplicate: they wait for the 500 ms poll",
		File: "gateway/waiters.go", From: "func (w *waiters) settled(key string) {\n\tw.wake(key, nil)\n}", To: "func (w *waiters) settled(key string) {}",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestWaitIsWokenNotPolled$"}}},
	{Name: "sighup-not-forwarded", Behaviour: "SIGHUP is caught but never reaches the reload: only the 2 s file watcher reloads",
		File: "cmd/idemgateway/main.go", From: "case <-sig:\n\t\t\t\tselect {\n\t\t\t\tcase now <- struct{}{}:\n\t\t\t\tcase <-ctx.Done():\n\t\t\t\t\treturn\n\t\t\t\t}", To: "case <-sig:",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestReload$"}}},
	{Name: "bolt-nosync", Behaviour: "bbolt is opened with NoSync: writes return before they reach the disk, and a power loss loses them",
		File: "boltstore/boltstore.go", From: "&bolt.Options{Timeout: opts.LockTimeout,", To: "&bolt.Options{NoSync: true, Timeout: opts.LockTimeout,",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestTransitionsSurvivePowerLoss$"}, {Pkg: "./e2e", Run: "^TestReceiptsSurviveKill9$/^embedded,_power_cut$"}}},
	{Name: "fenced-writes-nosync-bolt", Behaviour: "commit, mark unknown, renew and reclaim return before their write reaches the disk: a power cut loses them",
		File: "boltstore/boltstore.go", From: "func (s *Store) fenced(op, key string, change func(r *record, now int64) bool) (ok bool, err error) {", To: "func (s *Store) fenced(op, key string, change func(r *record, now int64) bool) (ok bool, err error) {\n\ts.db.NoSync = true",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestTransitionsSurvivePowerLoss$"}}},
	{Name: "release-nosync-bolt", Behaviour: "Release returns before its delete reaches the disk: after a power cut the key is in_progress again, then outcome_unknown",
		File: "boltstore/boltstore.go", From: "func (s *Store) Release(ctx context.Context, key, owner string) (ok bool, err error) {", To: "func (s *Store) Release(ctx context.Context, key, owner string) (ok bool, err error) {\n\ts.db.NoSync = true",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestTransitionsSurvivePowerLoss$"}}},
	{Name: "lapse-claim-nosync-bolt", Behaviour: "the claim that turns a lapsed lease into outcome_unknown returns before that reaches the disk: a power cut drops the record from the unknown list",
		File: "boltstore/boltstore.go", From: "case r.lapsed(now):\n\t\t\tr.state = stateUnknown", To: "case r.lapsed(now):\n\t\t\tr.state = stateUnknown\n\t\t\ts.db.NoSync = true",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestTransitionsSurvivePowerLoss$"}}},
	{Name: "delete-nosync-bolt", Behaviour: "an operator's DELETE returns before it reaches the disk: after a power cut the record is back",
		File: "boltstore/boltstore.go", From: "func (s *Store) Delete(ctx context.Context, key string) (existed bool, err error) {", To: "func (s *Store) Delete(ctx context.Context, key string) (existed bool, err error) {\n\ts.db.NoSync = true",
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestTransitionsSurvivePowerLoss$"}}},
	{Name: "changed-fingerprint-on-unknown-is-409", Behaviour: "another effect fingerprint under a key whose outcome is unknown gets 409 outcome_unknown instead of 422",
		File: "gateway/effect.go", From: "case prev.EffectFingerprint != x.fp:", To: "case prev.EffectFingerprint != x.fp && state != StateUnknown:",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_OutcomeUnknownBlock$"}}},
	{Name: "wait-ignores-wait-timeout", Behaviour: "a duplicate with concurrency: wait waits up to an hour, whatever wait_timeout says",
		File: "gateway/effect.go", From: "waitUntil := time.Now().Add(rt.WaitTimeout)", To: "waitUntil := time.Now().Add(time.Hour)",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestConcurrentDuplicates$/^wait$"}, {Pkg: "./e2e", Run: "^TestContract_InFlightWait$"}}},
	{Name: "failed-commit-frees-key", Behaviour: "a settle the store failed (a commit when the store is away) frees the key, so a retry executes again",
		File:  "gateway/proxy.go",
		From:  "\tcase err != nil:\n\t\tx.logger().Error(\"record not settled: store failed\"",
		To:    "\tcase err != nil:\n\t\t_, _ = x.g.store.Release(context.Background(), x.skey, x.owner) // mutant\n\t\tx.logger().Error(\"record not settled: store failed\"",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestStoreDownAtCommit$"}}},
	{Name: "stale-commit-not-logged", Behaviour: "a commit the store refuses to a stale owner (lease lost) is not logged",
		File: "gateway/proxy.go",
		From: "\t\tx.logger().Error(\"record not settled: the store refused a stale owner (lease lost)\", \"op\", op)\n",
		To:   "",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestAbandon$"}}},
	{Name: "grace-over-not-abandoned", Behaviour: "a shutdown whose grace ran out leaves the calls it cut off in_progress, not outcome_unknown at once",
		File: "cmd/idemgateway/main.go", From: "n := gw.Abandon(context.Background())", To: "n := 0",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestShutdownGraceRunsOut$"}}},
	// Shutdown, reload and routing at process level (issue 11).
	{Name: "shutdown-grace-ignored", Behaviour: "shutdown waits for calls in flight without a deadline",
		File: "cmd/idemgateway/main.go", From: "sctx, cancel := context.WithTimeout(context.Background(), grace)", To: "sctx, cancel := context.WithCancel(context.Background())",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestShutdownGraceRunsOut$"}}},
	{Name: "lease-renewal-faked", Behaviour: "renewals are counted but never reach the store",
		File: "gateway/effect.go", From: "ok, err := x.g.store.Renew(ctx, x.skey, x.owner, x.rt.LockLease)", To: "ok, err := ctx != nil, error(nil)",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestC02_LeaseRenewedDuringLongCall$"}}},
	{Name: "in-progress-executes-again", Behaviour: "a duplicate that finds the key in progress executes too",
		File: "gateway/effect.go", From: "\t\tif claimed {", To: "\t\tif claimed || state == StateInProgress {",
		Tests: []Target{{Pkg: "./e2e", Run: "^(TestC01_SimultaneousDuplicates|TestConcurrentDuplicates|TestTwoReplicasShareRedis)$"}}},
	{Name: "replay-also-calls-upstream", Behaviour: "a replay calls the upstream first and discards its answer (the replay itself looks right)",
		File: "gateway/exchange.go", From: "func (x *exchange) decide(decision string) {\n\tx.decision = decision",
		To:    "func (x *exchange) decide(decision string) {\n\tif decision == DecisionReplay {\n\t\tx.owner = \"\"\n\t\tww := middleware.NewWrapResponseWriter(x.w, 1)\n\t\tww.Discard()\n\t\tx.g.proxy.ServeHTTP(ww, x.request())\n\t}\n\tx.decision = decision",
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_ResolveUnknown$"}}},
	{Name: "405-without-allow", Behaviour: "405 answers carry no Allow header",
		File: "gateway/router.go", From: `w.Header().Set("Allow", strings.Join(allow, ", "))`, To: `_ = strings.Join(allow, ", ")`,
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_NoRoute$"}}},
	{Name: "method-not-allowed-as-404", Behaviour: "another method on a known path answers 404",
		File: "gateway/router.go", From: `fmt.Errorf("%w: no route for %s %s", ErrMethodNotAllowed,`, To: `fmt.Errorf("%w: no route for %s %s", ErrNoRoute,`,
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_NoRoute$"}}},
	{Name: "commit-failure-not-error", Behaviour: "a receipt the store failed to write is logged below error level",
		File: "gateway/proxy.go", From: `x.logger().Error("record not settled: store failed", "op", op, "err", err)`, To: `x.logger().Warn("record not settled: store failed", "op", op, "err", err)`,
		Tests: []Target{{Pkg: "./e2e", Run: "^TestStoreDownAtCommit$"}}},

	// Store readiness, settle notices, the admin list, the fingerprint CLI (issue 11).
	{Name: "list-endpoint-dropped", Behaviour: "GET /v1/records is no longer routed",
		File: "gateway/admin.go", From: `r.Get("/v1/records", g.listRecords)`, To: `_ = g.listRecords`,
		Tests: []Target{{Pkg: "./adminclient", Run: "^TestListAgainstGateway$"}}},
	{Name: "ping-error-swallowed", Behaviour: "Ping reports an unreachable Redis ready",
		File: "redisstore/ping.go", From: `return fmt.Errorf("redisstore: ping: %w", err)`, To: `return nil`,
		Tests: []Target{{Pkg: "./cmd/idemgateway", Run: "^TestSecretsNeverPrinted$"}, {Pkg: "./redisstore", Run: "^TestPingUnreachable$"}}},
	{Name: "prefix-scan-not-pooled", Behaviour: "LookupPrefixes never returns its scan to the pool",
		File: "canonical/prefix.go", From: "\tprefixScans.Put(s)\n", To: "\t_ = s\n",
		Tests: []Target{{Pkg: "./canonical", Run: "^TestLookupPrefixesAllocs$"}}},
	{Name: "prefix-scratch-dropped", Behaviour: "the scan's scratch buffer is dropped after every pass",
		File: "canonical/prefix.go", From: `if cap(s.buf) > 64<<10 {`, To: `if cap(s.buf) >= 0 {`,
		Tests: []Target{{Pkg: "./canonical", Run: "^TestLookupPrefixesAllocs$"}}},
	{Name: "ping-ignores-info-policy", Behaviour: "with CONFIG refused, any INFO reply reads as noeviction",
		File: "redisstore/ping.go", From: `if policy := infoField(info, "maxmemory_policy"); policy != "" {`, To: `if policy := "noeviction"; info != "" {`,
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestPingEvictionPolicy$"}}},
	{Name: "ping-config-refused-fail-open", Behaviour: "a refused CONFIG counts as noeviction (the old fail-open)",
		File: "redisstore/ping.go", From: `// CONFIG refused (or silent about the policy): ask INFO, which a renamed CONFIG leaves alone.`, To: "if err != nil {\n\t\treturn \"noeviction\", nil\n\t}",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestPingEvictionPolicy$"}}},
	{Name: "ping-unknown-policy-ready", Behaviour: "CONFIG and INFO both refused: the store is reported ready",
		File: "redisstore/ping.go", From: `return "", fmt.Errorf("redisstore: cannot read maxmemory-policy (%s; INFO memory: %v): %w (allow CONFIG GET or INFO, or allow eviction explicitly)", configNote, err, ErrEvictionPolicy)`, To: `return "noeviction", nil`,
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestPingEvictionPolicy$"}}},
	{Name: "stopped-watch-still-notified", Behaviour: "a stopped watch keeps hearing its key while other watches run",
		File: "redisstore/notify.go", From: "\tdelete(sub.watches, w)\n\tif len(sub.watches) == 0 && n.subs[channel] == sub {", To: "\tif len(sub.watches) == 1 && n.subs[channel] == sub {\n\t\tdelete(sub.watches, w)",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestWatchSettledUnwatch$"}}},
	{Name: "notice-to-every-watch", Behaviour: "a notice is delivered to the watches of every channel",
		File: "redisstore/notify.go", From: "\t\t\tif sub := n.subs[m.Channel]; sub != nil {", To: "\t\t\tfor _, sub := range n.subs {",
		Tests: []Target{{Pkg: "./redisstore", Run: "^(TestWatchSettled|TestCluster)$"}}},
	{Name: "notice-dropped", Behaviour: "redisstore receives settle notices but calls no watch",
		File: "redisstore/notify.go", From: "\t\t\tfor _, fn := range fns { // outside the lock: fn may stop its watch\n\t\t\t\tfn()", To: "\t\t\tfor _, fn := range fns { // outside the lock: fn may stop its watch\n\t\t\t\t_ = fn",
		Tests: []Target{{Pkg: "./redisstore", Run: "^(TestWaitAcrossGateways|TestWatchSettled)$"}}},
	{Name: "notice-wakes-no-waiter", Behaviour: "another process's settle notice wakes no waiting duplicate",
		File: "gateway/waiters.go", From: "stop, err := w.notifier.WatchSettled(ctx, key, func() { w.wake(key, k) })", To: "stop, err := w.notifier.WatchSettled(ctx, key, func() {})",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestWaitAcrossGateways$"}}},
	{Name: "commit-not-replicated", Behaviour: "commits are not replicated to replicas",
		File: "redisstore/scripts/commit.lua", From: "redis.call('HSET', KEYS[1], 'state', 'committed', 'payload', ARGV[2])", To: "redis.set_repl(redis.REPL_AOF)\nredis.call('HSET', KEYS[1], 'state', 'committed', 'payload', ARGV[2])",
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestSentinelFailover$"}}},
	{Name: "explain-drops-query", Behaviour: "Explain leaves the listed query parameters out of the document the serving path uses",
		File: "gateway/explain.go", From: "\t\te.Document, err = rt.Fingerprint.Document(req)", To: "\t\te.Document, err = rt.Fingerprint.Document(&canonical.Request{Tool: req.Tool, Method: req.Method, PathParams: req.PathParams, Header: req.Header, Body: req.Body})",
		Tests: []Target{{Pkg: "./cmd/idemgateway", Run: "^TestFingerprintMatchesServing$"}}},
	{Name: "explain-derives-without-tenant", Behaviour: "Explain derives keys without the request's tenant",
		File: "gateway/explain.go", From: `key, source, err = deriveKey(rt, r, e.Tenant, body)`, To: `key, source, err = deriveKey(rt, r, routes.DefaultTenant, body)`,
		Tests: []Target{{Pkg: "./cmd/idemgateway", Run: "^TestFingerprintMatchesServing$"}}},
	{Name: "explain-wrong-credential-scope", Behaviour: "Explain's credential scope differs from the serving path's",
		File: "gateway/explain.go", From: `e.CredentialScope = credentialScope(cred)`, To: `e.CredentialScope = credentialScope(h)`,
		Tests: []Target{{Pkg: "./cmd/idemgateway", Run: "^TestFingerprintMatchesServing$"}}},
	{Name: "explain-accepts-two-tenants", Behaviour: "Explain explains a request with two tenant headers that serving refuses",
		File: "gateway/explain.go", From: "\tif n := len(r.Header.Values(rt.TenantHeader)); n > 1 {", To: "\tif n := len(r.Header.Values(rt.TenantHeader)); n > 2 {",
		Tests: []Target{{Pkg: "./cmd/idemgateway", Run: "^TestFingerprintMatchesServing$"}}},
}
