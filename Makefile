# idemgateway — make demo runs the main job; make test runs the tests (both need Go and redis-server).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build demo test redis-server fuzz vet clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# The gateway in front of the bundled sandbox upstream, on the embedded store, driven by a scripted
# agent: execute, client timeout then retry, conflict, concurrent duplicates.
demo: build
	./bin/demo -bin bin

# The tests start their own redis-server processes on free ports; this only makes sure the program
# is installed (from Debian's packages when running as root).
test: redis-server
	$(GO) test -race -count=1 ./...

redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; \
	  else echo "make test needs redis-server: sudo apt-get install redis-server" >&2; exit 1; fi; }

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=60s ./canonical

vet:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin data
