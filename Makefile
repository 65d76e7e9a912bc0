# Every target installs what it needs first (as root, through apt-get and the
# Go module proxy), so `make demo` and `make test` work on a fresh machine.

GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The race detector needs cgo.
export CGO_ENABLED := 1

.PHONY: all deps test demo chaos lint bench clean

all: lint test

## deps: install redis-server, libfaketime and gcc for clock faults, and PostgreSQL (the SQL
## fence's tests start their own server on loopback), when missing.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing faketime"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@redis-server --version

## test: the whole suite against real redis-server processes (and Docker containers where an
## engine runs), race detector on. One package at a time: the fault scenarios time real leases,
## and two suites fighting over two cores make them noisy.
test: deps
	$(GO) test -race -count=1 -p 1 -timeout 20m ./...
	cd redlockotel && $(GO) test -race -count=1 -timeout 5m ./...

## demo: every chaos scenario, with and without fencing, a few seconds each; prints the
## table and writes chaos-report.html.
demo: deps
	$(GO) run ./cmd/redlock-chaos chaos -duration 4s -report chaos-report.html

## chaos: the long version, 30 s per scenario and mode.
chaos: deps
	$(GO) run ./cmd/redlock-chaos chaos -duration 30s -report chaos-report.html

## lint: go vet and staticcheck.
lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd redlockotel && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

## bench: this library against redsync, bsm/redislock and a raw fan-out on the same local nodes;
## writes docs/benchmarks.md and docs/benchmarks-nodes.svg (about 6 minutes).
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count 1 .
	cd bench && $(GO) run . -out ../docs/benchmarks.md -chart ../docs/benchmarks-nodes.svg

clean:
	$(GO) clean -testcache
