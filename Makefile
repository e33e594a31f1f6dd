# Every target sets up .venv on a fresh machine first; pins live in pyproject.toml.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.installed-stamp

# The tests of the compiled modules, run again as Python by `make test`.
PURE_TESTS := tests/test_compiled.py tests/codec tests/commit tests/test_wire.py \
	tests/test_duplicate_keys.py tests/fuzz/test_batch_format.py tests/server/test_http_sans_io.py \
	tests/server/test_bad_input.py

.PHONY: run test coverage lint generate unasync profile wrk redis-server system-packages bytecode reliability bench screenshots pipeline-demo chaos fuzz-api clean

# The broker's own dependencies only (what `make run` needs), not compiled: serving
# first (a new user's first `make run` waited ~55 s for the compiler, 3 minutes on a busy
# machine); `make run` compiles in the background, for the next start ...
$(RUNTIME): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==26.3
	BROOK_COMPILE=0 $(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUNTIME)

# ... and the extras the tests, benchmarks and Spark need (every other target): one
# install with the extras, not one after the other (each compiles the hot path).
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==26.3
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench,spark]'
	touch $(RUNTIME) $(STAMP) $(NATIVE)

# The hot path's modules, compiled with Cython (src/brook/compiled.py lists them; the
# installs above compile them): compiled again when one of their sources changes, so
# what runs is never older than what is read.
COMPILED := $(shell sed -n '/^MODULES = (/,/^)/s/^ *"\(brook[a-z_.]*\)",$$/\1/p' src/brook/compiled.py \
	| sed 's|\.|/|g; s|^|src/|; s|$$|.py|')
NATIVE := $(VENV)/.compiled-stamp
$(NATIVE): $(RUNTIME) $(COMPILED)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(NATIVE)

# `make run PORT=8081 DATA=/var/lib/brook` overrides; left out, BROOK_PORT and BROOK_DATA,
# then brook.toml, then the defaults (8080, ./brook-data) apply. The hot path, when not
# compiled yet (or its sources changed), is compiled beside the broker, at low priority:
# this start runs it as Python, the next one compiled (brook/compiled.py decides).
run: $(RUNTIME)
	@$(MAKE) --no-print-directory -q $(NATIVE) || { echo "brook: compiling the hot path in the background, for the next start ($(VENV)/compile.log)"; nice -n 10 $(MAKE) --no-print-directory $(NATIVE) > $(VENV)/compile.log 2>&1 & }
	$(VENV)/bin/brook serve $(if $(DATA),--data $(DATA)) $(if $(PORT),--port $(PORT))

lint: $(STAMP) $(NATIVE)
	$(VENV)/bin/ruff check src tests benchmarks examples scripts setup.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples scripts setup.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/operations_table.py --check
	$(PY) scripts/client_calls.py --check
	$(PY) scripts/unasync.py --check

# What is made from the table of operations (brook/operations/) and api.py's Protocols:
# PROTOCOL.md's table (scripts/operations_table.py), the async client's generic calls
# (scripts/client_calls.py), and the sync client from the async one (scripts/unasync.py).
# Edit a row, a Protocol or client/aio*.py, then this; `make lint` fails until it is run.
generate: $(STAMP) $(NATIVE)
	$(PY) scripts/operations_table.py
	$(PY) scripts/client_calls.py
	$(PY) scripts/unasync.py

unasync: generate

# Debian packages the tests drive: chromium, for the dashboard's tests in a real browser;
# fuse3 (libfuse), for the power-loss tests' file system (tests/powerloss).
# Installed only when missing (that needs root and Debian's package registry).
system-packages:
	@(test -x /usr/bin/chromium && test -x /usr/bin/fusermount3 && test -x /usr/bin/node) || \
		(apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fuse3 nodejs >/dev/null)

# Brook's and the tests' modules as bytecode, written now: where PYTHONDONTWRITEBYTECODE is
# set (as on this project's machines) every process would compile them from source again,
# 0.25 of the 0.5 s a `brook serve` spends importing, and the suites start hundreds.
bytecode: $(STAMP)
	$(PY) -m compileall -q src tests benchmarks > /dev/null

# Three processes on the machine's two cores: the suite waits on servers, fsyncs and
# timers for part of its time (vmstat: 20% idle with two processes, 13% with three;
# docs/RELIABILITY.md). Then the compiled modules' own tests again, as Python
# (BROOK_PURE=1): the fallback for machines without a compiler passes the same tests.
test: lint system-packages bytecode
	$(PY) -m pytest --durations=25 -n 3 --dist loadgroup
	BROOK_PURE=1 $(PY) -m pytest -n 3 --dist loadgroup $(PURE_TESTS)

# The same suite measured by coverage (a quarter slower: kept out of `make test`'s budget).
coverage: $(STAMP) $(NATIVE) system-packages bytecode
	BROOK_TEST_SLOWDOWN=3 $(PY) -m pytest --cov=brook --cov-report=term:skip-covered

# The reliability suite at scale (docs/RELIABILITY.md has each figure and its command):
# many more kills, power cuts, deaths and take-overs than `make test` runs, 200,000
# coverage-guided fuzz inputs per target, a 30-minute soak plotted to docs/soak.png, and
# 10,000 topics and 1,000 endpoints served under a descriptor limit of 1,024.
# Every randomized test prints its seed; BROOK_SEED replays one.
reliability: $(STAMP) $(NATIVE) system-packages bytecode
	BROOK_CRASH_KILLS=200 BROOK_QUEUE_CRASH_KILLS=100 BROOK_SERVER_CRASH_KILLS=100 \
	BROOK_TIMER_CRASH_KILLS=100 BROOK_DELIVERY_CRASH_KILLS=100 BROOK_POWER_CUTS=50 \
	BROOK_LAKE_CRASH_KILLS=100 BROOK_WORKER_SIM_SEEDS=4000 BROOK_WAL_SIM_EXAMPLES=2000 \
	BROOK_MANY_TOPICS=1000 BROOK_MANY_GROUPS=50 BROOK_MANY_CRASH_KILLS=20 \
	BROOK_MACHINE_DEATHS=30 BROOK_TAKE_OVERS=60 BROOK_CHORD_CRASH_ROUNDS=200 \
	BROOK_SPARK_DRIVER_KILLS=10 BROOK_SPARK_ROWS_PER_TRIGGER=10000 BROOK_PUBLISH_KILLS=60 BROOK_DEMO_MASTER='local-cluster[2,1,1024]' \
	BROOK_FUZZ_RUNS=200000 BROOK_SOAK_S=1800 BROOK_SOAK_PNG=docs/soak.png \
	BROOK_TENANT_TOPICS=10000 BROOK_TENANT_ENDPOINTS=1000 BROOK_TENANT_OPEN_FILES=1024 \
	BROOK_CHAOS_SEEDS=1-50 BROOK_CHAOS_MINUTES=5 \
	$(PY) -m pytest -p no:cacheprovider -s tests/chaos tests/crash tests/powerloss tests/fuzz tests/soak \
	tests/sim/test_clock_steps.py tests/sim/test_worker_sim.py tests/sim/test_wal_state_machine.py tests/upgrade tests/server/test_http_framing.py \
	tests/server/test_security.py tests/storage/test_s3_takeover.py \
	tests/spark/test_cluster.py tests/spark/test_pipeline_demo.py tests/staging/test_resume.py \
	tests/tenants tests/lake/test_crash.py tests/tasks/test_canvas_crash.py \
	--timeout 7200
	$(PY) -m tests.fuzz.schemathesis_run --seeds 1,7

# One seeded run of everything under faults, checked by the history checker (tests/chaos):
# `make chaos SEED=7 MINUTES=5 [STORAGE=s3]`. A failure prints the seed and what broke.
chaos: $(STAMP) $(NATIVE) bytecode
	$(PY) -m tests.chaos.run --seed $(or $(SEED),1) --minutes $(or $(MINUTES),5) \
		--storage $(or $(STORAGE),local)

# The outside fuzzer: schemathesis's command line, every phase, against a plain
# `brook serve`; it must find no server error. `make fuzz-api SEEDS=1,7 MAX_TIME_S=300`
fuzz-api: $(STAMP) $(NATIVE) bytecode
	$(PY) -m tests.fuzz.schemathesis_run $(if $(SEEDS),--seeds $(SEEDS)) $(if $(MAX_TIME_S),--max-time $(MAX_TIME_S))

# The HTTP load generator the server benchmarks and profiles drive (Debian's package).
wrk:
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)

# Debian's redis-server, for the tasks benchmark's RQ baseline.
redis-server:
	@command -v redis-server >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null)

bench: $(STAMP) $(NATIVE) wrk redis-server bytecode
	$(PY) -m benchmarks.run

# Where the time goes on the hot paths: py-spy samples the benchmarks' runs (and the
# `brook serve` they start); collapsed stacks and summaries in .bench/profiles/.
profile: $(STAMP) $(NATIVE) wrk
	$(PY) -m benchmarks.profile $(SCENARIOS)

# The dashboard's pages at 1280x800 in docs/ui/ (shown in the README).
screenshots: $(STAMP) $(NATIVE) system-packages
	$(PY) -m tests.ui.screenshots docs/ui

# Beside a broker already serving ./brook-data (make run): make pipeline-demo URL=http://127.0.0.1:8080
pipeline-demo: $(STAMP) $(NATIVE)
	$(PY) examples/pipeline.py --data ./brook-data --out ./pipeline-demo $(if $(URL),--url $(URL),)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis pipeline-demo build
	find src -name '*.so' -delete -o -name '*.c' -delete
	find src tests benchmarks -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -f src/brook/compiled.json
