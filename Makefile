# Redrive — common tasks. `make help` lists them.
GO        ?= go
BIN       ?= bin/redrive
PKGS      ?= ./...
BENCH_N   ?= 200000

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@# Colour only on a terminal: piped or redirected help stays plain text.
	@if [ -t 1 ]; then c='\033[36m'; r='\033[0m'; else c=''; r=''; fi; \
	awk -v c="$$c" -v r="$$r" 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %s%-10s%s %s\n", c, $$1, r, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the redrive binary into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/redrive

.PHONY: run
run: ## Run the embedded stack: in-process Kafka on 127.0.0.1:9092 (REDRIVE_KAFKA_PORT), throwaway Postgres (or DATABASE_URL), API on :8080 (REDRIVE_HTTP_ADDR)
	@$(GO) build -o $(BIN) ./cmd/redrive
	@# exec: Ctrl-C reaches redrive itself, which shuts down cleanly and exits 0
	@# (go run would report the interrupt as a failure). dev reads its settings
	@# from the environment, REDRIVE_HTTP_ADDR and REDRIVE_KAFKA_PORT among them,
	@# whether given to make's environment or on its command line (make exports
	@# both to the recipe).
	exec ./$(BIN) dev

.PHONY: test
test: ## Run every test against real Postgres and in-process Kafka
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The tests at the times calendar code breaks at (internal/testdate/instants,
# the next ones after today): a week's first and last minute, a year's last,
# Feb 29's last, and 30 s before a DST change with TZ (so Postgres's TimeZone)
# America/New_York. REDRIVE_TEST_NOW moves the tests' clocks and, through
# datefudge, Postgres's now(). Not the chaos suite: its redrive serve
# processes run on the machine's clock.
DATE_PKGS ?= $$($(GO) list ./... | grep -v '/internal/chaos$$')

.PHONY: test-dates
test-dates: ## Run the tests at a week's start and end, a year's end, Feb 29 and a DST change
	@instants=$$(mktemp); $(GO) run ./internal/testdate/instants > $$instants || exit 1; \
	failed=""; while read -r name tz at; do \
		echo "== test-dates $$name: REDRIVE_TEST_NOW=$$at TZ=$$tz"; \
		REDRIVE_TEST_NOW=$$at TZ=$$tz $(GO) test -count=1 -timeout 15m $(DATE_PKGS) || failed="$$failed $$name"; \
	done < $$instants; rm -f $$instants; \
	if [ -n "$$failed" ]; then echo "test-dates failed at:$$failed"; exit 1; fi

.PHONY: chaos
chaos: ## Run the full chaos suite: kill -9 serve and stop Postgres under load (REDRIVE_CHAOS_SEED, REDRIVE_CHAOS_LOGS=dir)
	REDRIVE_CHAOS=full $(GO) test -count=1 -timeout 30m -run TestChaos -v ./internal/chaos

# The official OJS conformance suite (openjobspec/ojs-conformance) is not in
# this repository: OJS_SUITE is the directory holding its run.sh and
# target.txt. docs/conformance.md: the cases documented as defective in
# internal/conformance/corrections.json must fail as published and pass
# corrected; every other case must pass. Ports: OJS_HTTP, OJS_KAFKA, OJS_HOOK.
OJS_SUITE ?=

.PHONY: conformance
conformance: ## Run the OJS conformance suite (OJS_SUITE=dir of its run.sh): only the documented case defects may fail, and pass corrected
	@test -n "$(OJS_SUITE)" || { echo "make conformance OJS_SUITE=/path/to/the/directory/holding/the/suite's/run.sh"; exit 2; }
	bash internal/conformance/run.sh "$(OJS_SUITE)"

# sqlc compiles internal/store/queries/*.sql against the migrations into
# internal/store/internal/dbsqlc (committed). A dev tool, pinned, in ./bin.
SQLC_VERSION := v1.31.1
SQLC         := $(CURDIR)/bin/sqlc

$(SQLC): Makefile
	GOBIN=$(CURDIR)/bin $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	@touch $@

.PHONY: generate
generate: $(SQLC) ## Compile the store's SQL (internal/store/queries) with sqlc
	cd internal/store && $(SQLC) generate

.PHONY: check-generate
check-generate: $(SQLC) ## Fail when the code sqlc generates is stale
	@cd internal/store && $(SQLC) diff || { echo "internal/store/internal/dbsqlc is stale: run make generate"; exit 1; }

.PHONY: lint
lint: check-generate ## Run golangci-lint (falls back to go vet + staticcheck when it is not installed), check generated code
	@if command -v golangci-lint >/dev/null 2>&1; then \
		golangci-lint run $(PKGS); \
	else \
		echo "golangci-lint not found; running go vet and staticcheck"; \
		$(GO) vet $(PKGS) && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS); \
	fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

.PHONY: bench
bench: ## Measure ingest (JSON and Avro), redelivery, fairness beside a failing backlog, API, pruning, abuse and console page loads (raw baselines in the same run)
	@# River, the peer, is its own module (internal/bench/riverpeer): a bench-only dependency.
	$(GO) build -C internal/bench/riverpeer -o $(CURDIR)/bin/riverpeer .
	$(GO) run ./cmd/redrive bench --records $(BENCH_N) --river-peer $(CURDIR)/bin/riverpeer
	@# What hostile records and clients cost serve (docs/operations.md).
	$(GO) run ./cmd/redrive bench --suite abuse --rounds 1
	@# The console's pages in headless Chromium over the api suite's 1M records.
	$(GO) test -run '^$$' -bench PageLoad -benchtime 1x -timeout 30m ./internal/console

.PHONY: fuzz
fuzz: ## Run each fuzz target for a short while
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./internal/envelope
	$(GO) test -run '^$$' -fuzz FuzzParseDuration -fuzztime 30s ./internal/policy
	$(GO) test -run '^$$' -fuzz FuzzDecodeRetry -fuzztime 30s ./internal/policy
	$(GO) test -run '^$$' -fuzz FuzzInsert -fuzztime 30s ./internal/store
	$(GO) test -run '^$$' -fuzz FuzzSplit -fuzztime 30s ./internal/schema
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./internal/schema
