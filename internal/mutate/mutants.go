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
		Tests: []Target{{Pkg: "./redisstore", Run: "^TestConformance$/^FencingRefusesOtherOwnersAndStates$"}}},

	// The mutants that survived every test at 62d8848 (issue 11).
	{Name: "settle-wakes-no-waiter", Behaviour: "an in-process settle wakes no waiting duplicate: they wait for the 500 ms poll",
		File: "gateway/waiters.go", From: "func (w *waiters) settled(key string) {\n\tw.wake(key, nil)\n}", To: "func (w *waiters) settled(key string) {}",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestWaitIsWokenNotPolled$"}}},
	{Name: "sighup-not-forwarded", Behaviour: "SIGHUP is caught but never reaches the reload: only the 2 s file watcher reloads",
		File: "cmd/idemgateway/main.go", From: "case <-sig:\n\t\t\t\tselect {\n\t\t\t\tcase now <- struct{}{}:\n\t\t\t\tcase <-ctx.Done():\n\t\t\t\t\treturn\n\t\t\t\t}", To: "case <-sig:",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./e2e", Run: "^TestReload$"}}},
	{Name: "bolt-nosync", Behaviour: "bbolt is opened with NoSync: writes return before they reach the disk, and a power loss loses them",
		File: "boltstore/boltstore.go", From: "&bolt.Options{Timeout: opts.LockTimeout,", To: "&bolt.Options{NoSync: true, Timeout: opts.LockTimeout,",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./boltstore", Run: "^TestCommitSurvivesKill9$"}, {Pkg: "./e2e", Run: "^TestReceiptsSurviveKill9$/^embedded$"}}},
	{Name: "changed-fingerprint-on-unknown-is-409", Behaviour: "another effect fingerprint under a key whose outcome is unknown gets 409 outcome_unknown instead of 422",
		File: "gateway/effect.go", From: "case prev.EffectFingerprint != x.fp:", To: "case prev.EffectFingerprint != x.fp && state != StateUnknown:",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_OutcomeUnknownBlock$"}}},
	{Name: "wait-ignores-wait-timeout", Behaviour: "a duplicate with concurrency: wait waits up to an hour, whatever wait_timeout says",
		File: "gateway/effect.go", From: "waitUntil := time.Now().Add(rt.WaitTimeout)", To: "waitUntil := time.Now().Add(time.Hour)",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestConcurrentDuplicates$/^wait$"}, {Pkg: "./e2e", Run: "^TestContract_InFlightWait$"}}},
	{Name: "failed-commit-frees-key", Behaviour: "a settle the store failed (a commit when the store is away) frees the key, so a retry executes again",
		File: "gateway/proxy.go",
		From: "\tcase err != nil:\n\t\tx.logger().Error(\"record not settled: store failed\"",
		To:   "\tcase err != nil:\n\t\t_, _ = x.g.store.Release(context.Background(), x.skey, x.owner) // mutant\n\t\tx.logger().Error(\"record not settled: store failed\"",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./e2e", Run: "^TestContract_StoreUnreachable$"}}},
	{Name: "stale-commit-not-logged", Behaviour: "a commit the store refuses to a stale owner (lease lost) is not logged",
		File: "gateway/proxy.go",
		From: "\t\tx.logger().Error(\"record not settled: the store refused a stale owner (lease lost)\", \"op\", op)\n",
		To:   "",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./gateway", Run: "^TestAbandon$"}}},
	{Name: "grace-over-not-abandoned", Behaviour: "a shutdown whose grace ran out leaves the calls it cut off in_progress, not outcome_unknown at once",
		File: "cmd/idemgateway/main.go", From: "n := gw.Abandon(context.Background())", To: "n := 0",
		// survives at 62d8848; guarded by issue 11's new tests
		Tests: []Target{{Pkg: "./e2e", Run: "^TestGracefulShutdownFinishesInFlight$"}}},
}
