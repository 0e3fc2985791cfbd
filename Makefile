# idemgateway — make demo runs the main job (needs Go); make test runs the tests (Go, redis-server, PostgreSQL, Chromium, Node.js).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build demo test unit example-temporal slowest test-busy redis-server postgresql chromium screenshots mcpts fuzz vet clean chart-test image-binary helm-lint mutate mutate-all stress

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# The gateway in front of the bundled sandbox upstream, on the embedded store, driven by a scripted
# agent: execute, client timeout then retry, conflict, concurrent duplicates; then an MCP agent
# (go-sdk) through a kind: mcp route: retry, new session, conflict, slow tool.
demo: build
	./bin/demo -bin bin

# The flags of every test run. The tests mostly wait (on servers, processes, leases), so a package
# runs eight at a time: go test's default, GOMAXPROCS (two here), left both cores idle while tests
# slept (docs/contributing.md, "Running the tests").
TESTFLAGS ?= -race -count=1 -parallel 8

# The tests start their own redis-server processes on free ports; this only makes sure the program
# is installed (from Debian's packages when running as root). The chart's tests are a Go module of
# their own (Helm and Kubernetes stay out of the gateway's module); chart-test runs them.
test: redis-server postgresql chromium mcpts chart-test example-temporal
	$(GO) test $(TESTFLAGS) ./...

# The inner loop: every package but the end-to-end tests of the built binaries (e2e/). Under two
# minutes on two cores.
unit: redis-server postgresql
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v '/e2e\(/\|$$\)')

# Where make test's time goes: each package's time and the 15 slowest tests (internal/slowest).
slowest: redis-server postgresql chromium mcpts
	$(GO) test $(TESTFLAGS) -json ./... | $(GO) run ./internal/slowest -n 15

# The proof under load (docs/contributing.md, "Under load"): while two busy loops keep both cores
# full, the store conformance suites and the gateway package run ten times each, then the whole
# make test twice. Nothing is run again on failure. About 12 minutes on two cores.
BUSY_COUNT ?= 10
test-busy: redis-server postgresql chromium mcpts
	@while :; do :; done & b1=$$!; while :; do :; done & b2=$$!; \
	trap 'kill $$b1 $$b2' EXIT INT TERM; \
	start=$$(date +%s); \
	echo "test-busy: two busy loops (pids $$b1 $$b2); conformance and gateway, -count=$(BUSY_COUNT)"; \
	$(GO) test $(TESTFLAGS) -count=$(BUSY_COUNT) -run 'Conformance|^TestCluster$$' ./boltstore ./redisstore ./pgstore && \
	$(GO) test $(TESTFLAGS) -count=$(BUSY_COUNT) ./gateway && \
	echo "test-busy: make test, first run" && $(MAKE) --no-print-directory test && \
	echo "test-busy: make test, second run" && $(MAKE) --no-print-directory test && \
	echo "test-busy: passed in $$(( $$(date +%s) - start )) s"

# The bounds of a request's work on a real gateway process (docs/performance.md#bounded-work): peak
# RSS with 16 concurrent 1 MiB JSON and 8 concurrent 1 MiB GraphQL bodies, and an unrelated read's
# latency meanwhile against its idle latency. About a minute.
stress: build
	$(GO) run ./cmd/idemstress -gateway bin/idemgateway

# The mutation check (docs/contributing.md, "The mutation habit"): each mutant of
# internal/mutate/mutants.go is applied to a throwaway copy of the tree, the tests that should catch
# it run there, and a Markdown table says which were caught; it fails if any survived. make mutate
# runs the mutants of the core promises (the 27 rows marked Core; under ten minutes on two cores),
# make mutate-all all 299 rows (over an hour). Flags through MUTATEFLAGS, e.g. make mutate
# MUTATEFLAGS='-run bolt' or MUTATEFLAGS=-list.
mutate: redis-server
	$(GO) run ./internal/mutate -core $(MUTATEFLAGS)

mutate-all: redis-server mcpts
	$(GO) run ./internal/mutate $(MUTATEFLAGS)

# Renders the Helm chart with the Helm SDK, decodes every manifest strictly into Kubernetes types,
# lints it, and has the gateway binary accept the rendered routes and environment.
chart-test:
	cd charts/idemgateway/tests && $(GO) test -count=1 ./...

# The Temporal example (examples/temporal): a module of its own, so that the Temporal SDK stays out
# of the gateway's; its tests run the workflow in the SDK's test environment against this
# checkout's gateway.
example-temporal:
	cd examples/temporal && $(GO) test $(TESTFLAGS) ./...

# The real helm CLI, built from the same Helm module (slow the first time: it compiles all of Helm).
# chart-test covers the same ground through the SDK; this is for a look at the rendered YAML.
HELM := $(GO) run helm.sh/helm/v3/cmd/helm@v3.22.0
helm-lint:
	$(HELM) lint charts/idemgateway
	$(HELM) lint charts/idemgateway --set store.mode=redis --set store.redis.url=redis://redis:6379/0
	$(HELM) template gw charts/idemgateway --set store.mode=redis --set store.redis.url=redis://redis:6379/0 >/dev/null

# The binary of the Dockerfile, built the same way without a Docker engine: from the build context
# docker would send (the repository minus .dockerignore, outside any git work tree), with the
# Dockerfile's go build line, then checked: static (and stripped, where `file` is installed),
# trimmed, CGO off, and it runs and prints the stamped version. (With -trimpath, go version -m does
# not record -ldflags; the version check shows -X took effect.)
IMAGE_BINARY := bin/image/idemgateway
IMAGE_BUILD  := CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$${VERSION}" -o /out/idemgateway ./cmd/idemgateway
image-binary:
	@grep -qF '$(IMAGE_BUILD)' Dockerfile || { echo "image-binary: the Dockerfile's go build line is not: $(IMAGE_BUILD)" >&2; exit 1; }
	@rm -rf bin/image && mkdir -p bin/image
	@ctx=$$(mktemp -d) && trap 'rm -rf "$$ctx"' EXIT && \
	  tar -cf - --exclude-from=.dockerignore . | tar -xf - -C "$$ctx" && \
	  (cd "$$ctx" && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o out/idemgateway ./cmd/idemgateway) && \
	  cp "$$ctx/out/idemgateway" $(IMAGE_BINARY)
	$(GO) version -m $(IMAGE_BINARY) | grep -qE 'build[[:space:]]+CGO_ENABLED=0$$'
	$(GO) version -m $(IMAGE_BINARY) | grep -qE 'build[[:space:]]+-trimpath=true$$'
	@if command -v file >/dev/null 2>&1; then file $(IMAGE_BINARY) | grep 'statically linked' | grep -q 'stripped'; \
	 else ldd $(IMAGE_BINARY) 2>&1 | grep -q 'not a dynamic executable'; fi
	test "$$(./$(IMAGE_BINARY) version)" = "idemgateway $(VERSION)"
	@echo "image-binary: $(IMAGE_BINARY) is static, trimmed, stamped $(VERSION), and runs"

# The TypeScript MCP clients of the e2e tests (e2e/mcpts), installed from its lock file when the
# installed ones are older than it (needs Node.js 20+ and npm).
mcpts:
	@test e2e/mcpts/node_modules/.package-lock.json -nt e2e/mcpts/package-lock.json || npm ci --prefix e2e/mcpts --no-audit --no-fund

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; \
	  else echo "make test needs redis-server: sudo apt-get install redis-server" >&2; exit 1; fi; }

# PostgreSQL for the PostgreSQL store's tests (internal/pgtest starts servers of its own from the
# package's initdb and postgres).
postgresql:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; \
	  else echo "make test needs PostgreSQL: sudo apt-get install postgresql" >&2; exit 1; fi; }

# Chromium for the operator console's tests in a real browser (e2e/console_test.go, driven by chromedp).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	  else echo "make test needs Chromium: sudo apt-get install chromium" >&2; exit 1; fi; }

# The operator console's screenshots in docs/img, taken by its browser test (docs/operations.md#operator-console).
screenshots: chromium
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run '^TestConsole$$' ./e2e

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=60s ./canonical

vet:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin data

# staticcheck (honnef.co/go/tools) at a pinned version that supports Go 1.26, run with go run so
# nothing is installed; .ci/run runs the same pin.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
.PHONY: lint
lint:
	$(GO) run $(STATICCHECK) ./...

# The long chaos run (docs/guarantees.md#the-chaos-suite-e2echaos): e2e/chaos
# TestChaos with CHAOS_OPS operations (make test runs 550) under gateway kills, Redis stops, lost
# store replies and short leases, without -race so that it fits in 10 minutes on two cores; prints
# its table. Replay a run with E2E_CHAOS_SEED=<seed> from its first line.
CHAOS_OPS ?= 10000
.PHONY: chaos
chaos: redis-server
	E2E_CHAOS_OPS=$(CHAOS_OPS) $(GO) test -count=1 -timeout 20m -run '^TestChaos$$' -v ./e2e/chaos/

# The performance harness: the gateway against a bare reverse proxy on a local redis-server it
# starts itself, and on the embedded store, 4 to 5 minutes; prints a Markdown table
# (docs/performance.md#how-to-measure).
# Flags through BENCHFLAGS, e.g. make bench BENCHFLAGS='-reps 5 -rate 500'.
.PHONY: bench
bench: redis-server
	$(GO) run ./cmd/idembench $(BENCHFLAGS)
