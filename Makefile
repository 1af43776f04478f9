# Ostinato — the two commands a newcomer needs:
#   make up     install what is missing, start PostgreSQL, Kafka and the five services + a demo
#               (Jaeger for traces follows in the background; TRACING=1 waits for it)
#   make test   install what is missing, start the servers the tests need, run the whole suite
#   make up HA=1  the HA profile: PostgreSQL primary + synchronous standby, three Kafka brokers
#               and two instances of each service
#               (infra/README.md "HA profile"; `make down` stops it too)
#   make up S3=1  the services keep archived runs on a real S3 server (SeaweedFS, built once per
#               machine with Go: infra/README.md "SeaweedFS") instead of the local .cache/objects
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
# Every Python step sees the same addresses as the infra scripts (infra/env.sh: its defaults,
# or what the environment already sets, e.g. OSTINATO_PG_PORT).
WITH_ENV := . infra/env.sh &&
export UV_PYTHON_DOWNLOADS := never
# HA=1: every recipe (and infra/env.sh) runs in the HA profile.
ifneq ($(HA),)
export OSTINATO_HA := 1
endif
# S3=1: the services' object store is the local S3 server (infra/env.sh OSTINATO_OBJECT_STORE_URL).
ifneq ($(S3),)
export OSTINATO_S3 := 1
endif

.PHONY: help deps assets bench-deps up down test unit lint lock infra-up infra-down migrate \
	topics clean screenshots \
	bench bench-infra chaos infra-ha-up

help:
	@echo "make up [HA=1] [S3=1] | down | test | unit | lint | bench [QUICK=1] | chaos [HA=1] [QUICK=1] | screenshots | lock | clean"

# Python environment from the committed, hash-pinned lock file (uv installed with pip if missing).
deps: $(VENV)/.synced
$(VENV)/.synced: requirements.lock pyproject.toml
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	@test -x $(PY) || uv venv --quiet --python python3 $(VENV)
	uv pip sync --quiet --python $(PY) requirements.lock
	uv pip install --quiet --python $(PY) --no-deps -e .
	@touch $@

# the tests' servers: the object-store tests need the S3 server (built once per machine, cached)
infra-up:
	infra/up.sh postgres kafka jaeger s3

infra-down:
	infra/down.sh

migrate: deps
	$(WITH_ENV) $(PY) -m ostinato migrate

topics: deps
	$(WITH_ENV) $(PY) -m ostinato topics

# Swagger UI's assets, served by the api itself, and axe-core, which the browser tests inject
# to check each UI page's accessibility (each fetched once into .cache; see the scripts).
assets:
	infra/swagger_ui.sh
	infra/axe.sh

# PostgreSQL and Kafka first; Jaeger is only waited for with TRACING=1, otherwise started from
# the cached binary or built and started in the background (infra/jaeger/background.sh).
up: deps assets
	infra/up.sh $(if $(HA),postgres-ha kafka-ha,postgres kafka) $(if $(TRACING),jaeger) $(if $(S3),s3)
	$(WITH_ENV) $(PY) -m ostinato migrate
	$(WITH_ENV) $(PY) -m ostinato topics
	$(if $(TRACING),,infra/jaeger/background.sh)
	infra/services.sh start

down:
	-infra/services.sh stop
	infra/down.sh

test: deps assets infra-up
	infra/tools.sh
	$(WITH_ENV) $(PY) -m pytest

# Benchmarks only: the peers and the profiler on top of the project's own lock (never in `deps`).
bench-deps: $(VENV)/.synced-bench
$(VENV)/.synced-bench: requirements-bench.lock $(VENV)/.synced
	uv pip sync --quiet --python $(PY) requirements-bench.lock
	uv pip install --quiet --python $(PY) --no-deps -e .
	@touch $@

# PostgreSQL, Kafka and (for Celery, a peer) Redis; the same variables as infra/up.sh. And
# Temporal's dev server, the workflow peer (infra/temporal.sh: built from the Go module proxy
# once per machine, minutes cold; never by `make up` or `make test`).
bench-infra:
	infra/up.sh postgres kafka redis
	infra/temporal.sh up

# Figures, never timed assertions: every scenario of bench/README.md, one summary table at the
# end (bench/results/*.json). QUICK=1: minutes instead of an hour; ONLY=a,b / SKIP=a,b choose
# scenarios (throughput start_lag burst idle_cost failover peers); PROFILE=1: py-spy summaries.
bench: bench-deps bench-infra
	$(WITH_ENV) $(PY) -m bench.run_all $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY)) \
		$(if $(SKIP),--skip $(SKIP)) $(if $(PROFILE),--profile)

# The fault suite under load, two instances of each service, one table at the end
# (bench/results/chaos.json). HA=1: on the HA profile's servers (PostgreSQL primary + standby,
# three Kafka brokers) with its faults (the Kafka leader killed, a broker down for a minute, the
# primary killed, one instance of each service killed); QUICK=1: bench/chaos.py --quick.
chaos: deps $(if $(HA),infra-ha-up,infra-up)
	$(WITH_ENV) $(PY) bench/chaos.py $(if $(QUICK),--quick)

infra-ha-up:
	infra/up.sh postgres-ha kafka-ha

unit: deps
	$(PY) -m pytest tests/unit

# docs/ui/*.png, the web UI's screenshots (docs/UI.md "Screenshots"), taken again by its browser
# tests as they drive each page.
screenshots: deps assets infra-up
	infra/tools.sh
	$(WITH_ENV) OSTINATO_UI_SCREENSHOTS=docs/ui $(PY) -m pytest tests/e2e/test_ui*.py -q

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo
	$(PY) tests/helpers/lint_test_imports.py

# Re-pin dependencies after editing pyproject.toml (no index URL is written into the file).
lock:
	uv pip compile pyproject.toml --group dev --generate-hashes --python-version 3.11 \
		--quiet -o requirements.lock
	uv pip compile pyproject.toml --group dev --extra bench --generate-hashes \
		--python-version 3.11 --quiet -c requirements.lock -o requirements-bench.lock

# Forget local state (databases, broker data, demo key); download caches are kept.
clean: down
	rm -rf .cache
