# Two commands for a newcomer on a fresh machine:
#   make demo   set everything up and run the demonstration
#   make test   set everything up and run lint, types and tests
# Both create .venv when it is missing; nothing else needs doing first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.windowfit-installed

# Tokenizer files ship inside these wheels; windowfit reads the files and never imports the
# packages, so they are installed without their (large) dependency trees.
TOKENIZER_DATA := litellm mistral-common
# Real text of about a hundred languages for benchmarks/languages_report.py and its tests:
# the translation catalogs inside these wheels, read as zip files (never installed).
CORPUS_WHEELS := Django==5.1.4 sphinx==8.1.3
CORPUS_DIR := .cache/corpora

.PHONY: demo test lint types unit bench clean setup clients clients-py debian

setup: $(STAMP) $(SPEEDUP_STAMP) clients clients-py debian

# The real agent clients (Claude Code, Codex) that end-to-end tests drive offline, pinned in
# clients/package-lock.json. Skipped with a notice where npm is missing (their tests then skip).
CLIENTS_STAMP := clients/node_modules/.windowfit-installed
clients: $(CLIENTS_STAMP)

$(CLIENTS_STAMP): clients/package.json clients/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix clients --no-audit --no-fund --loglevel=error && touch $(CLIENTS_STAMP); \
	else echo "npm not found: the Claude Code / Codex end-to-end tests will skip"; fi

# The real Python agent client (mini-swe-agent, on litellm) the proxy tests drive, pinned in
# clients/requirements.txt, in a venv of its own: its litellm and openai would not share .venv's.
CLIENTS_PY := .venv-clients
CLIENTS_PY_STAMP := $(CLIENTS_PY)/.windowfit-installed
clients-py: $(CLIENTS_PY_STAMP)

$(CLIENTS_PY_STAMP): clients/requirements.txt
	test -x $(CLIENTS_PY)/bin/python || $(PYTHON) -m venv $(CLIENTS_PY)
	$(CLIENTS_PY)/bin/python -m pip install --quiet --disable-pip-version-check -r clients/requirements.txt
	touch $(CLIENTS_PY_STAMP)

# Debian programs that tests run for real: redis-server (the proxy's shared state) and
# chromium (the proxy's live page, headless). Installed with apt-get where missing, at the
# versions tested (the archive's current one once that has gone); where apt-get cannot run
# (not root, not Debian) a notice is printed and their tests skip saying why.
DEBIAN_PINS := redis-server=5:7.0.15-1~deb12u7 chromium=150.0.7871.100-1~deb12u1
debian:
	@missing=""; for pin in $(DEBIAN_PINS); do \
		command -v "$${pin%%=*}" >/dev/null 2>&1 || missing="$$missing $$pin"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "apt-get unavailable: not installing$$missing (their tests will skip)"; exit 0; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq >/dev/null; \
	apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
		|| apt-get install -y -qq --no-install-recommends $$(for p in $$missing; do echo "$${p%%=*}"; done) >/dev/null \
		|| echo "apt-get could not install$$missing (their tests will skip)"

$(STAMP): pyproject.toml setup.py Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,tokenizers,sdk,gemini,server,proxy,peers,plot,integrations]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps $(TOKENIZER_DATA)
	$(BIN)/python -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
		--dest $(CORPUS_DIR) $(CORPUS_WHEELS)
	touch $(STAMP)

# The optional C speedups (src/windowfit/_weigh.c and _bpe.c, built by setup.py) are
# compiled by the editable install above; this rebuilds it when its source changes. Without
# a C compiler the build goes on without it (windowfit then counts in Python, same counts).
SPEEDUP_STAMP := $(VENV)/.windowfit-speedup
$(SPEEDUP_STAMP): $(STAMP) setup.py src/windowfit/_weigh.c src/windowfit/_bpe.c
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(SPEEDUP_STAMP)

demo: setup
	$(BIN)/windowfit demo

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

types: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

test: lint types unit

bench: $(STAMP)
	$(BIN)/python benchmarks/core.py

clean:
	rm -rf $(VENV) $(CLIENTS_PY) .mypy_cache .ruff_cache .pytest_cache .hypothesis
