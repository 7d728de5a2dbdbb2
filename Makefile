# acpx-sidecar — everything a fresh machine needs comes from here:
# Go modules via the module proxy, the pinned ACP agents via npm (the lock).
SHELL := /bin/bash
GO    ?= go
BIN   := bin
# What `make build` puts in bin/: the product (cmd/acpx-sidecar), and the
# loopback model stub and demo host that `make demo` runs. The test-only
# fault agent (internal/faultagent) is not among them: the tests that need
# it build it into their own temp dirs.
BUILD_PKGS := ./cmd/acpx-sidecar ./internal/modelstub/cmd/modelstub ./examples/demohost

.PHONY: all deps build demo test vet unit e2e bench leakcheck clean fmt-check fuzz

all: build

# Installs exactly package-lock.json (the agents of internal/agentenv:
# @agentclientprotocol/codex-acp 2.6.0, @zed-industries/codex-acp 0.16.0,
# claude-agent-acp 0.101.0, gemini-cli 0.61.0, opencode-ai 1.18.33; and
# acpx 0.19.1; package.json pins exact versions). Not `npm ci`: npm 11
# leaves other platforms' optional packages out of the lock and then refuses
# its own lock in `npm ci`; `npm install --no-save` installs from the lock
# unchanged. The version check below fails the stamp if the install did not
# produce the pinned agents.
PINNED_AGENTS := @agentclientprotocol/codex-acp@2.6.0 @zed-industries/codex-acp@0.16.0 \
	@agentclientprotocol/claude-agent-acp@0.101.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33
node_modules/.package-lock.json: package.json package-lock.json
	npm install --no-save --no-audit --no-fund --loglevel=error
	@for pv in $(PINNED_AGENTS); do p=$${pv%@*}; v=$${pv##*@}; \
		got=$$(node -p "require('./node_modules/$$p/package.json').version" 2>/dev/null); \
		if [ "$$got" != "$$v" ]; then echo "node_modules: $$p is '$$got', want $$v"; exit 1; fi; done
	@touch $@

deps: node_modules/.package-lock.json
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(BUILD_PKGS)

# The main job end to end on a real agent against the loopback model:
# `make demo` runs Codex (@agentclientprotocol/codex-acp 2.6.0);
# `make demo AGENT=claude|gemini|opencode|codex-legacy` runs the same job on
# another agent (internal/agentenv).
AGENT ?= codex
demo: build
	$(BIN)/demohost --agent $(AGENT) --repo-root . --sidecar $(BIN)/acpx-sidecar --modelstub $(BIN)/modelstub

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Everything CI runs: vet, gofmt, unit + end-to-end tests under -race
# (e2e tests build the binaries themselves and drive them over stdio),
# then a check that no test process survived.
# ACPX_TEST_RUN prefixes every marker this run's tests give their processes
# (internal/testmark), so the leak check sees only this run's.
ACPX_TEST_RUN ?= run$(shell od -An -N4 -tx4 /dev/urandom | tr -d ' ')
export ACPX_TEST_RUN

test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 8m ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=1s
	@$(MAKE) --no-print-directory leakcheck

# Go fuzz targets (issue 12): host frames (framing, the whole host side),
# session/open params, provider stdout lines, record decoding. `go test
# ./...` already runs each one's seed corpus; `make fuzz` fuzzes each for
# FUZZTIME (default 30s; `make test` gives each 1s). A failing input is
# saved under the package's testdata/fuzz/ and replayed by `go test`.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./internal/jsonl:FuzzReader ./internal/rpc:FuzzFrameStream ./internal/rpc:FuzzServer_HostFrames \
	./protocol:FuzzOpenParams ./internal/adapter:FuzzProviderLines ./internal/store:FuzzRecordDecode
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

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN)
