# Every target installs what it needs first (as root, through apt-get and the
# Go module proxy), so `make demo` and `make test` work on a fresh machine.

GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The race detector needs cgo.
export CGO_ENABLED := 1

# The packages whose tests talk to server processes: the Valkey and FIPS passes run these.
NODE_PKGS   := . ./fence ./cmd/redlock ./internal/luascript
# What the Valkey and FIPS passes skip of the root package: tests of the client's own ordering,
# waiting and timing (the queue, Do's watchdog, load, the adversarial reviews of client-side
# races), which `make test` has run under -race against redis-server and which send no script
# or command the other tests do not. The FIPS pass also skips the token load test, which the
# Valkey pass keeps for its scripts. Together they took 200 s of each pass's 316 s.
# The replays of the adversarial reviews of client-side races (they were TestReview*: their names
# now say what they pin, docs/tests.md), skipped by the Valkey and FIPS passes as before.
REVIEWED    := TestAfterOwnEndsAtTheCallersDeadline|TestCloseWhileLockMultiWaits|TestConcurrentExtendsLeaveUntilPastTheKeys|TestCounterexample3AcrossPrimitives|TestCtxCutBeforeCommitLeavesNothingLocked|TestDoKeepsAShortenedLock|TestDoMultiLostLockContext|TestErrReleasedHidesAnotherHolder|TestExtendWaitsForTheUnlocksObserver|TestExtendWarningCarriesTheQuorumError|TestFailedShorteningExtendKeepsTheOldUntil|TestLineClusterNodes|TestLineDeadHeadHoldsTheLineUntilTheNextRetry|TestLineHeadLeavingWakesNobody|TestLineMixedRequestsNeverOverlap|TestLineReleasedHolderStaysInLine|TestLineShrinkBehindAnImpossibleHead|TestLineTryAcquireRetriesEverySlotAgainstTheLine|TestLockMultiStarvedByMemberWaiters|TestMultiClusterClientsAsNodes|TestMultiGiveBackLetsANewcomerBarge|TestMultiLateAcquisitionAfterRollbackTakesNoMember|TestMultiLeavesQueuesOnCloseAndUnlock|TestMultiPromiseBeforeSubscribeNotGivenBack|TestMultiWrongTypeMemberBehindAHeldOne|TestOutageGiveUpLeavesTheQueue|TestOwnReleaseInFlightAcrossPrimitives|TestPassOnPingPongStarvesTheLockWaiter|TestProvisionOfAMajorityRestoredFromAPreIDSnapshot|TestProvisionWithANodeMadeAReplicaDuringIt|TestRWCloseWhileWaiting|TestRWCommitAbortsAcrossSides|TestRWDowngradeAfterValidityEnded|TestRWDowngradeOverAWrongTypeReadersKeyDropsTheWriteHold|TestRWDowngradedWaiterBlocksNewReaders|TestRWFailedDowngradeLandsLateAndLetsAReaderIntoAWriteHold|TestRWInnerReentryDowngradesTheOuterWriteHold|TestRWLateReadAfterRollbackLeavesNoEntry|TestRWPartialDowngradeThenExtendAndUnlock|TestRWReadersDoNotAbortEachOther|TestRWReentryThroughACancelledContext|TestRWWriterThatGaveUpDoesNotBlockReaders|TestReaderMarkCutShortByAWritersJoin|TestReadersMarkLifeBlocksNothingAndExpires|TestReentryDoReturnsWithTheLockStillHeld|TestReentrySiblingDoRunsWithoutWatchdog|TestReentryUnlockedHandleStillExtends|TestRepairRefusesANilOption|TestRollbackRetryHoldsBackARecoveredNode|TestSemaphoreCensusOfMaxPermits|TestSemaphoreClusterNodesWithoutFencing|TestSemaphoreShrinkUndoneByALaggingNodeAndARepairFenced|TestSemaphoreShrinkUndoneByALaggingNodeAndARestart|TestSemaphoreSizeExpiresUnderAHeldPermitWithoutFencing|TestSemaphoreStaleMinorityTurnsContentionIntoOutage|TestWrongTypeErrorWithACraftedName
CLIENT_SIDE := $(REVIEWED)|TestLoad|TestNoTwoHoldersOverlap|TestLate|TestWaiters|TestDo|TestBurst|TestSettling|TestEvenNodeCount|TestLockWarns|TestLockGivesUp|TestSubscription|TestAHung|TestMajorityPromise|TestLockCancelled|TestStale|TestTheFirstAttempt|TestChaos|TestClose|TestSplit|TestCrashed|TestPlaces|TestWoken|TestNext|TestHung|TestQueue
VALKEY_SKIP := ^($(CLIENT_SIDE))
FIPS_SKIP   := ^(TestTokensAreUniqueAndFollowRealTime|$(CLIENT_SIDE))
# The oldest Go the module declares (go.mod's go line): test-oldest-go builds with it.
GO_MIN      := $(shell sed -n 's/^go //p' go.mod)

.PHONY: all deps deps-valkey test test-root test-chaos test-rest soak compat-root compat-rest test-valkey test-fips test-compat test-oldest-go ci demo chaos lint bench bench-quick model-deep clean

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
## engine runs), race detector on, in three lanes: the root package (its tests that wait on real
## leases with nodes of their own run four at a time); the chaos harness and the commands; the
## other packages one at a time, then the protocol models' exhaustive searches without -race (which
## would slow them tenfold). Most of the suite waits on real leases, not on the CPU, so three
## lanes fit two cores. Each lane prints its output when it ends.
test: deps
	$(MAKE) --no-print-directory -j3 --output-sync=target test-root test-chaos test-rest

test-root:
	$(GO) test -race -count=1 -parallel 4 -timeout 20m .

test-chaos:
	$(GO) test -race -count=1 -p 1 -timeout 20m ./chaos ./cmd/...

test-rest:
	$(GO) test -race -count=1 -p 1 -timeout 20m $$($(GO) list ./... | grep -vx 'github.com/quorumlock/redlock\|github.com/quorumlock/redlock/chaos\|github.com/quorumlock/redlock/cmd/.*')
	cd redlockotel && $(GO) test -race -count=1 -timeout 5m ./...
	$(GO) test -count=1 -timeout 10m ./internal/protomodel ./internal/waitmodel ./internal/familymodel

## soak: the root package's soaks (hundreds of goroutines, or seconds of contention, on real nodes:
## TestLoad*, TestNoTwoHoldersOverlap, TestTokensAreUniqueAndFollowRealTime), which make test skips
## (REDLOCK_SOAK unset). They assert that nothing breaks under load, never a timing. CI runs them in a
## pass of their own.
soak: deps
	REDLOCK_SOAK=1 $(GO) test -race -count=1 -timeout 20m -run '^(TestLoad|TestNoTwoHoldersOverlap|TestTokensAreUniqueAndFollowRealTime)' .

## model-deep: the protocol models (internal/protomodel, internal/familymodel) searched to larger
## bounds than make test does: every interleaving of clients, wipes, snapshots and repairs (see
## their package docs).
model-deep:
	PROTOMODEL_DEEP=1 $(GO) test -count=1 -timeout 120m -run Deep -v ./internal/protomodel
	FAMILYMODEL_DEEP=1 $(GO) test -count=1 -timeout 120m -run Deep -v ./internal/familymodel

## deps-valkey: install valkey-server 8.0 from Debian's backports suite, beside redis-server
## (.ci/install-valkey derives the apt source from the machine's own Debian source).
deps-valkey: deps
	.ci/install-valkey

## test-valkey: the packages that talk to nodes, against valkey-server instead of redis-server
## (REDLOCK_SERVER_BINARY, read by node.StartProcess). Without -race: `make test` has run it. -short
## and VALKEY_SKIP leave out the client-side tests, which `make test` ran.
test-valkey: deps-valkey
	REDLOCK_SOAK=1 REDLOCK_SERVER_BINARY=valkey-server $(GO) test -short -skip '$(VALKEY_SKIP)' -count=1 -p 1 -timeout 20m $(NODE_PKGS)

## test-fips: the same packages in FIPS 140-only mode, where any use of a non-approved
## algorithm (SHA-1 among them) panics. -short, and FIPS_SKIP, as for test-valkey.
test-fips: deps
	GODEBUG=fips140=only $(GO) test -short -skip '$(FIPS_SKIP)' -count=1 -p 1 -timeout 20m $(NODE_PKGS)

## test-compat: test-valkey and test-fips in one pass: the same packages against valkey-server with
## the client in FIPS 140-only mode. The server's scripts and the client's algorithms are
## independent, so one pass covers both at half the time (CI runs this one).
## In two lanes, as make test.
test-compat: deps-valkey
	$(MAKE) --no-print-directory -j2 --output-sync=target compat-root compat-rest

COMPAT := REDLOCK_SOAK=1 REDLOCK_SERVER_BINARY=valkey-server GODEBUG=fips140=only $(GO) test -short -skip '$(VALKEY_SKIP)' -count=1 -p 1 -timeout 20m

compat-root:
	$(COMPAT) .

compat-rest:
	$(COMPAT) $(filter-out .,$(NODE_PKGS))

## test-oldest-go: build and vet every package with the oldest Go that go.mod declares
## (GOTOOLCHAIN fetches it through the module proxy), and run the fence's and scripts' tests.
test-oldest-go: deps
	GOTOOLCHAIN=go$(GO_MIN) $(GO) version
	GOTOOLCHAIN=go$(GO_MIN) $(GO) vet ./...
	cd redlockotel && GOTOOLCHAIN=go$(GO_MIN) $(GO) vet ./...
	GOTOOLCHAIN=go$(GO_MIN) $(GO) test -count=1 -p 1 -timeout 10m ./fence ./internal/luascript

## ci: what .ci/run runs, in order.
ci: lint test soak test-compat test-oldest-go

## demo: every chaos scenario, with and without fencing, a few seconds each, then the lock
## family's workloads (read-write lock, semaphore, multi-lock) under kills and pauses, a paused
## client, clock jumps and empty restarts; prints the table and writes chaos-report.html.
demo: deps
	$(GO) run ./cmd/redlock-chaos chaos -duration 4s -family all -report chaos-report.html

## chaos: the long version, 30 s per scenario and mode.
chaos: deps
	$(GO) run ./cmd/redlock-chaos chaos -duration 30s -family all -report chaos-report.html

## lint: go vet and staticcheck.
lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd redlockotel && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	# bench is a module of its own: vetting it keeps a change here from breaking make bench.
	cd bench && $(GO) vet ./...

## bench: this library against three floors, redsync (defaults and best settings) and bsm/redislock on
## the same local nodes, 5 runs, medians with ranges; writes docs/benchmarks.md, and the lock family
## against the mutex to docs/benchmarks-family.md (about 15-20 minutes; `cd bench && go run . -only
## family` is the family's page alone, about a minute).
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count 1 .
	cd bench && $(GO) run . -out ../docs/benchmarks.md

## bench-quick: a smoke run of the report (2 small runs, about 2 minutes), written to a temporary file.
bench-quick: deps
	cd bench && $(GO) run . -quick

clean:
	$(GO) clean -testcache
