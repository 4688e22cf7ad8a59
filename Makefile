# ICLR 2026, Reproduced -- two commands:
#   make book   build the HTML book into _build/html (creates .venv and installs the stack)
#   make test   the whole gate: unit tests, every notebook under nbval, the strict build
SHELL := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2
JB     := $(VENV)/bin/jupyter-book build . --all -W -n --keep-going

.PHONY: book test lint bench sweep chapter venv chromium clean portability
.DEFAULT_GOAL := book

# $(call timed,PHASE,COMMAND): run COMMAND; when it succeeds, record its wall time as PHASE in
# _build/gate-times.json (make bench and the status page show the phases of the last gate).
timed = t0=$$(date +%s.%N) && $(2) && $(PY) -m lib.sphinxext.gate record $(1) $$t0

# Installing runs only when requirements.txt or pyproject.toml changed (the stamp is newer).
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	t0=$$(date +%s.%N) && $(PY) -m pip install --quiet --upgrade pip && \
	  $(PY) -m pip install --quiet -r requirements.txt && \
	  $(PY) -m lib.sphinxext.gate record install $$t0
	touch $(STAMP)

venv: $(STAMP)

# The browser test drives Debian's chromium (never a downloaded browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# --all: always re-read every page (the execution cache, not Sphinx, decides what runs).
# Cached outputs of a chapter are reused only if what it depends on is unchanged (the core of
# lib/, the paper modules its notebooks import, BOOK_SCALE, BOOK_SEED); otherwise the build
# executes that chapter's notebooks again (strictly: an error fails it).
book: $(STAMP)
	$(PY) -m lib.sphinxext.cache invalidate-stale
	$(JB)

# Style and architecture rules that check themselves: ruff over the library, the tests,
# the benchmarks and the notebooks' code cells; import-linter's contracts (pyproject.toml).
LINTED := lib tests benchmarks conftest.py
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(PY) -m lib.sphinxext.style check
	$(VENV)/bin/lint-imports
	$(VENV)/bin/actionlint .github/workflows/*.yml

# Each notebook runs once: under nbval (in parallel), whose outputs then fill the build's
# execution cache, so the strict build that follows executes nothing a second time.
# Then the built HTML is checked in headless chromium (tests marked `built`), two pages at once.
ONE_CORE := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BOOK_SCALE=quick
test: $(STAMP) chromium
	@if [ -n "$$BOOK_SCALE" ] && [ "$$BOOK_SCALE" != "quick" ]; then \
	  echo "make test runs at BOOK_SCALE=quick (got '$$BOOK_SCALE')"; exit 2; fi
	$(PY) -m lib.sphinxext.gate start
	$(call timed,lint,$(MAKE) --no-print-directory lint)
	$(PY) -m lib.sphinxext.cache invalidate-stale
	$(PY) -m lib.sphinxext.cache clear-records
	$(call timed,unit,$(ONE_CORE) $(PY) -m pytest -n $(JOBS) --durations=10 \
	  -m "not built and not binder" tests)
	$(call timed,nbval,$(ONE_CORE) $(PY) -m pytest -n $(JOBS) --dist loadscope --durations=15 \
	  --nbval-lax --nbval-current-env --nbval-cell-timeout=300 book)
	$(call timed,binder,$(ONE_CORE) $(PY) -m pytest -m binder tests/test_binder.py)
	$(call timed,build,$(PY) -m lib.sphinxext.cache fill-cache && BOOK_SCALE=quick $(JB) && \
	  BOOK_SCALE=quick $(PY) -m lib.sphinxext.cache check-build)
	$(call timed,browser,BOOK_SCALE=quick $(PY) -m pytest -n $(JOBS) -m built tests/test_html.py)
	@$(PY) -m lib.sphinxext.gate show

# The time budget, measured: every notebook alone on one core (median of BENCH_REPEATS runs)
# and its peak memory, each chapter's total, and the phases of the last `make test`. Run it on
# an idle machine; it writes book/_data/budget-quick.json (commit it: the status page shows it).
BENCH_REPEATS ?= 3
bench: $(STAMP)
	$(PY) benchmarks/budget.py --repeats $(BENCH_REPEATS) $(if $(CHAPTERS),--chapters $(CHAPTERS))

# One chapter as a test, at any seed and scale, with its claim table printed at the end:
#   make chapter CH=18 [NB=spectrum] [BOOK_SEED=5] [BOOK_SCALE=full]
chapter: $(STAMP)
	$(PY) -m lib.sphinxext.chapter "$(CH)" "$(NB)"

# Claims across seeds, on Dask (outside the gate): every (notebook, seed) pair is one task.
# SEEDS=0-9 (a range or a list), CHAPTERS=01,07 (default: all), BOOK_SCALE as usual;
# BOOK_DASK_SCHEDULER=tcp://host:8786 uses that cluster instead of a LocalCluster here.
# Resumable: a (notebook, seed) pair already run cleanly at the same code is skipped (FORCE=1
# reruns everything). Publishes each fully swept chapter to book/_data/sweep-<scale>.json (commit it: the ledger's
# seeds column reads it, keyed by each chapter's result stamp).
SEEDS ?= 0-9
sweep: $(STAMP)
	$(PY) -m lib.sphinxext.sweep --seeds $(SEEDS) $(if $(CHAPTERS),--chapters $(CHAPTERS)) \
	  $(if $(FORCE),--force)

# Which claims measure bit-identical values on another CPU: every notebook at BOOK_SEED=0
# with other instruction sets forced (torch scalar kernels, numpy without AVX2, SSE BLAS),
# compared with the records of the last `make test` (outside the gate).
portability: $(STAMP)
	$(PY) benchmarks/portability.py $(if $(CHAPTERS),--chapters $(CHAPTERS))

clean:
	rm -rf _build
