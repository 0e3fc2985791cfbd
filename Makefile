# idemgateway — make demo runs the main job; make test runs the tests (both need Go and redis-server).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build demo test fuzz vet clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# The gateway in front of the bundled sandbox upstream, on the embedded store, driven by a scripted
# agent: execute, client timeout then retry, conflict, concurrent duplicates.
demo: build
	./bin/demo -bin bin

test:
	$(GO) test -race -count=1 ./...

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=60s ./canonical

vet:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin data
