# Set-up and the two README commands (make demo, make test) on a fresh Debian machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
# Touched after a complete install, so the install reruns only when the lock or the native
# kernel's sources change.
VENV_STAMP := $(VENV)/.installed-from-lock
# Every dependency pinned with the hashes of its files (scripts/lock); `make lock` renews it.
LOCK := requirements-dev.lock
PIP := $(VENV)/bin/python -m pip --disable-pip-version-check
# command:Debian package; a package is installed only when its command is missing. apt's
# chatter is shown only when the install fails.
SYSTEM_DEPS := prometheus:prometheus kcat:kcat docker-compose:docker-compose \
	java:default-jre-headless mvn:maven chromium:chromium
# What `make demo` needs of them: the broker's Java and the Maven that fetches its jars.
DEMO_DEPS := java:default-jre-headless mvn:maven
LINT_PATHS := consumer indexstore tests docs examples benchmarks tools tools/decision-frontier \
	tools/compare-fingerprinting tools/accuracy-prototype tools/scraped-corpus
# Type-checked with mypy --strict ([tool.mypy] in pyproject.toml): the index, the Kafka loop
# and the Kafka harness; the rest is not annotated throughout yet.
TYPED_PATHS := indexstore consumer/records consumer/library consumer/stream/service.py consumer/stream/stage.py consumer/stream/checkpoint.py \
	consumer/stream/outputs.py consumer/stream/dead_letters.py consumer/stream/input_gaps.py \
	consumer/stream/broker_errors.py consumer/stream/batch_report.py consumer/harness
# make test runs the suite on this many pytest-xdist workers, each test file whole on one of
# them (--dist loadfile: a file's broker fixtures and fault sequences stay together); each
# worker starts its own broker. Most of the suite waits on brokers, so two workers take it from
# about 27 to about 15 minutes on two cores. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
# The native kernels (fingerprint and index probe) are built with cargo, which rustup installs here.
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE_SOURCES := $(foreach crate,consumer/native indexstore/native,\
	$(crate)/Cargo.toml $(crate)/Cargo.lock $(wildcard $(crate)/src/*.rs))

.PHONY: venv wheel lock audit system-deps test demo docs lint clean

venv: $(VENV_STAMP)

# Only the locked files go in (--require-hashes), then newsdedup itself without resolving
# anything; `pip check` then catches a lock that no longer satisfies pyproject.toml.
$(VENV_STAMP): pyproject.toml $(LOCK) Makefile $(NATIVE_SOURCES)
	@command -v cargo >/dev/null || { echo "make: cargo (Rust 1.85+) is needed to build consumer/native and indexstore/native; install it with rustup" >&2; exit 1; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "installing the pinned dependencies ($(LOCK)) and newsdedup into $(VENV)/"
	@$(PIP) install --quiet --require-hashes -r $(LOCK)
	@$(PIP) install --quiet --no-deps -e .
	@$(PIP) check >/dev/null || { $(PIP) check >&2; \
		echo "make: $(LOCK) does not satisfy pyproject.toml; run 'make lock'" >&2; exit 1; }
	@# The kernels are optional for pip (an install without cargo falls back to Python): not here.
	@$(VENV)/bin/newsdedup --version | grep -F "fingerprint yes, probe yes" >/dev/null || { \
		echo "make: a native kernel did not build; '$(PIP) install -v --no-deps -e .' shows why" >&2; \
		exit 1; }
	@touch $@

# newsdedup's wheel, with both native kernels, manylinux-tagged by auditwheel, into dist/.
wheel: venv
	@$(VENV)/bin/python scripts/wheel dist

# Re-resolves pyproject.toml against PyPI and rewrites both lock files (commit them).
lock:
	$(PYTHON) scripts/lock

# Known vulnerabilities in the locked versions (PyPI's advisory data, via pip-audit); see
# scripts/audit for what fails the build and what happens offline.
audit: venv
	@$(VENV)/bin/python scripts/audit $(LOCK)

system-deps:
	@missing=""; \
	for dep in $(or $(DEPS),$(SYSTEM_DEPS)); do \
		command -v "$${dep%%:*}" >/dev/null || missing="$$missing $${dep#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
		elif command -v sudo >/dev/null; then sudo="sudo"; \
		else echo "make: installing$$missing needs root or sudo" >&2; exit 1; fi; \
		echo "installing system packages:$$missing"; \
		log=$$(mktemp); \
		if ! { $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $$missing; } >"$$log" 2>&1; then \
			cat "$$log" >&2; rm -f "$$log"; \
			echo "make: apt-get install$$missing failed (output above)" >&2; exit 1; \
		fi; \
		rm -f "$$log"; \
	fi

# The session fixture in tests/conftest.py starts and stops the broker; fetching the jars here
# keeps the download out of the first test's time budget.
test: venv system-deps audit lint
	@scripts/kafka-local fetch >/dev/null
	@rc=0; $(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests, which is a failure" >&2; exit 1; fi; \
	exit $$rc

demo: venv
	@$(MAKE) --no-print-directory system-deps DEPS="$(DEMO_DEPS)"
	@scripts/demo

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link or
# anchor, a page missing from nav, or a configuration table that drifted from
# config/newsdedup.toml. make test builds it too (tests/project/test_docs_site.py).
docs: venv
	@NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	@echo "the site is in site/; open site/index.html"

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/python scripts/import-layers
	$(VENV)/bin/mypy --strict $(TYPED_PATHS)

# Leaves the Kafka jar cache (~/.cache/newsdedup) alone: it lives outside the repo on purpose.
clean:
	rm -rf $(VENV) build dist site .pytest_cache .ruff_cache .mypy_cache .hypothesis ./*.egg-info consumer/native/target consumer/_fastfp*.so \
		indexstore/native/target indexstore/_probe*.so
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
