# nomad-fft build and test entry points. `make dev` (or `make run`) is the
# main job, a local FFT cluster; `make test` is the whole test suite (what CI
# runs).

GO       ?= go
BIN      := bin
# DEV_ARGS are more fftctl dev flags, e.g. make dev DEV_ARGS="-round 5s".
DEV_ARGS ?=
# VERSION is the release version for `make release`, e.g. make release VERSION=0.1.0.
VERSION  ?=

.PHONY: all build dev run round test deps agents vet unit e2e chaos bench bench-e2e bench-load fuzz release clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## dev: the main job. `fftctl dev`: a local Consul agent, a Nomad server,
## three Nomad clients with different fake GPU models, the fft-allocator as
## a Nomad job (jobspecs/fft-allocator.nomad.hcl) on two more clients, and a
## sample workload; it prints every round until Ctrl-C. The first run
## builds the pinned Nomad and Consul agents into .cache (about 16 minutes on
## 2 cores); later runs start in seconds.
dev: build
	nomad_bin=$$(e2e/agents/build.sh) && consul_bin=$$(e2e/agents/build-consul.sh) && \
	FFT_NOMAD_BIN=$$nomad_bin FFT_CONSUL_BIN=$$consul_bin $(BIN)/fftctl dev $(DEV_ARGS)

## run: the main job, as dev.
run: dev

## round: solve the built-in example round and explain it.
round:
	$(GO) run ./cmd/fftctl round

## test: everything CI checks: vet, unit and property tests (with GLPK as the
## independent reference), fuzz seed corpora, and the end-to-end tests
## against a real Nomad 1.6.1 agent.
test: deps vet agents unit e2e

## deps: what the tests need beyond Go: GLPK's glpsol (Debian glpk-utils),
## for the solver's reference test, Chromium (Debian chromium), for the
## status page's browser test, jq (Debian jq), for the operator guide's
## commands (e2e/agents/nomad/guide), and PyTorch for the system Python (Debian
## python3-torch), for the PyTorch training job's tests. A pyenv or virtualenv
## python3 first on PATH does not see Debian's torch; the tests find
## /usr/bin/python3 (jobspecs.TorchPython), so that is what is checked.
## PyTorch comes without its recommends (libtorch-dev, build-essential): the
## tests only import it.
deps:
	@missing=""; \
	command -v glpsol >/dev/null 2>&1 || missing="$$missing glpk-utils"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v jq >/dev/null 2>&1 || missing="$$missing jq"; \
	torch=""; /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || torch=" python3-torch"; \
	if [ -n "$$missing$$torch" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing$$missing$$torch (Debian) for the tests"; \
			apt-get update -qq && \
			{ [ -z "$$missing" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } && \
			{ [ -z "$$torch" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$torch >/dev/null; }; \
		else \
			echo "missing:$$missing$$torch; run 'sudo apt-get install$$missing$$torch'" >&2; exit 1; \
		fi; \
	fi

## agents: the pinned Nomad 1.6.1 and Consul 1.16.1 agents, built once from
## their MPL modules into the ignored .cache folder (about 5 and 11 minutes
## on 2 cores the first time; later runs reuse them).
agents:
	e2e/agents/build.sh >/dev/null
	e2e/agents/build-consul.sh >/dev/null

## vet: go vet in every module, and the check that the e2e module still builds
## the Nomad agent from its pinned module versions (e2e/agents/pin.sh).
vet:
	@# A merge left half done must not land: no conflict markers in tracked files.
	@! git grep -nE '^(<<<<<<<|>>>>>>>) ' -- . || { echo 'conflict markers above: resolve them'; exit 1; }
	$(GO) vet ./...
	e2e/agents/pin.sh
	cd e2e/agents/nomad && $(GO) vet ./...
	cd e2e/agents/consul && $(GO) vet ./...

## unit: the main module's tests (e2e/agentrun, which the dev cluster and
## the e2e tests share, is one of its packages). The Consul store
## tests use the cached Consul agent (FFT_E2E=1 makes its absence a failure);
## FFT_REQUIRE_TORCH=1 makes a missing PyTorch a failure, not a skip.
unit:
	consul_bin=$$(e2e/agents/build-consul.sh) && \
	FFT_E2E=1 FFT_CONSUL_BIN=$$consul_bin FFT_REQUIRE_GLPSOL=1 FFT_REQUIRE_BROWSER=1 FFT_REQUIRE_TORCH=1 $(GO) test -count=1 ./...

## e2e: builds the Nomad agent once from the pinned MPL module into the
## ignored .cache folder (e2e/agents/build.sh), then runs the tests that
## start it (FFT_REQUIRE_TORCH=1: the PyTorch job's test cannot skip).
e2e:
	nomad_bin=$$(e2e/agents/build.sh) && consul_bin=$$(e2e/agents/build-consul.sh) && \
	cd e2e/agents/nomad && FFT_E2E=1 FFT_NOMAD_BIN=$$nomad_bin FFT_CONSUL_BIN=$$consul_bin FFT_REQUIRE_TORCH=1 \
		$(GO) test -count=1 -timeout 20m ./...

## chaos: the long chaos suite (e2e/agents/nomad/chaos), ACLs on: 20 SIGKILLs
## of the active allocator among three replicas, Consul and Nomad server
## restarts, GPU clients crashed and drained, GPUs turned unhealthy, the
## allocators' Consul token revoked, aimed at named phases of the round, then
## the invariants; `make e2e` runs its short version. CHAOS_SEED=<seed> replays.
CHAOS_SEED ?=
chaos:
	nomad_bin=$$(e2e/agents/build.sh) && consul_bin=$$(e2e/agents/build-consul.sh) && \
	cd e2e/agents/nomad && FFT_E2E=1 FFT_NOMAD_BIN=$$nomad_bin FFT_CONSUL_BIN=$$consul_bin \
		FFT_CHAOS_LONG=1 FFT_CHAOS_SEED=$(CHAOS_SEED) $(GO) test -count=1 -v -timeout 40m -run '^TestChaos$$' ./chaos/

## bench-e2e: one observe-solve-apply pass against a real Nomad agent with
## 200 managed jobs (wall time and API calls).
bench-e2e:
	nomad_bin=$$(e2e/agents/build.sh) && consul_bin=$$(e2e/agents/build-consul.sh) && \
	cd e2e/agents/nomad && FFT_E2E=1 FFT_NOMAD_BIN=$$nomad_bin FFT_CONSUL_BIN=$$consul_bin \
		$(GO) test -run '^$$' -bench '^BenchmarkRound200Jobs$$' -benchtime 3x ./allocator/

## bench-load: warm rounds of a running fft-allocator with 200 to 20,000
## managed jobs on a real Nomad server (API calls, Consul writes, wall time).
bench-load:
	nomad_bin=$$(e2e/agents/build.sh) && consul_bin=$$(e2e/agents/build-consul.sh) && \
	cd e2e/agents/nomad && FFT_E2E=1 FFT_NOMAD_BIN=$$nomad_bin FFT_CONSUL_BIN=$$consul_bin \
		$(GO) test -run '^$$' -bench WarmRound -benchtime 3x -timeout 90m ./allocator/

## bench: the solver targets of allocator/solver/README.md ("Speed").
bench:
	$(GO) test -run '^$$' -bench Decide -benchmem -count 5 ./allocator/

## fuzz: a run of FUZZTIME (default 30s) of every fuzz target of the main
## module, found by name (func Fuzz... in a _test.go file), so a new target is
## never left out; their seed corpora run in `make unit`. FUZZTIME=60s for longer.
FUZZTIME ?= 30s
fuzz:
	@set -e; n=0; \
	for f in $$(grep -rl --include='*_test.go' --exclude-dir=e2e --exclude-dir=.cache '^func Fuzz' . | sort); do \
		for fz in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
			echo "== $$fz ($$(dirname $$f))"; n=$$((n+1)); \
			$(GO) test -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME) $$(dirname $$f)/; \
		done; \
	done; echo "$$n fuzz targets ran $(FUZZTIME) each"

## release: versioned archives of every binary for linux/amd64 and linux/arm64
## in dist/ (<name>_<version>_<os>_<arch>.zip and nomad-fft_<version>_SHA256SUMS),
## checked to run; VERSION=0.1.0 names the version (default: the latest v* tag).
release:
	VERSION=$(VERSION) .ci/release

clean:
	rm -rf $(BIN) dist
