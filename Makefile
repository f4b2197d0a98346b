# Set-up and the two README commands (make demo, make test) on a fresh Debian machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
# Touched after a complete install, so the install reruns only when pyproject.toml or the native
# kernel's sources change.
VENV_STAMP := $(VENV)/.installed-from-pyproject
# command:Debian package; a package is installed only when its command is missing. apt's
# chatter is shown only when the install fails.
SYSTEM_DEPS := prometheus:prometheus kcat:kcat docker-compose:docker-compose \
	java:default-jre-headless mvn:maven
LINT_PATHS := consumer indexstore tests
# The native fingerprint kernel is built with cargo, which rustup installs here.
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE_SOURCES := consumer/native/Cargo.toml consumer/native/Cargo.lock $(wildcard consumer/native/src/*.rs)

.PHONY: venv system-deps test demo lint clean

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml Makefile $(NATIVE_SOURCES)
	@command -v cargo >/dev/null || { echo "make: cargo (Rust 1.85+) is needed to build consumer/native; install it with rustup" >&2; exit 1; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "installing newsdedup with its test and eval extras into $(VENV)/"
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,eval]'
	@touch $@

system-deps:
	@missing=""; \
	for dep in $(SYSTEM_DEPS); do \
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
test: venv system-deps
	@scripts/kafka-local fetch >/dev/null
	@rc=0; $(VENV)/bin/python -m pytest || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests, which is a failure" >&2; exit 1; fi; \
	exit $$rc

demo: venv
	@scripts/demo

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# Leaves the Kafka jar cache (~/.cache/newsdedup) alone: it lives outside the repo on purpose.
clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .hypothesis ./*.egg-info consumer/native/target consumer/_fastfp*.so
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
