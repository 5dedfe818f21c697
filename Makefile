# The README's two commands: `make report` (the main job) and `make test`.
# Both create a virtual environment in the checkout and install the package into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# worker processes of `make report` (a local Dask cluster; each cell runs on one of them)
WORKERS ?= 2
# pytest's worker processes (pytest-xdist), a whole test file each so that module-scoped fixtures are
# computed once. Two, not one per core: the timings quoted are on 2 cores, and every worker may start
# a Dask cluster, the pystruct peer or the kernels' OpenMP threads of its own. PYTEST_WORKERS=auto
# takes every core; PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
PYTEST_ARGS    := -n $(PYTEST_WORKERS) --dist loadfile
# the library's own tests: no end-to-end suite run (slow), no pystruct environment (peer), no
# slr_suite (tests/suite) and no tooling (tests/tooling: lint, types, docs, packaging, asv)
FAST := not slow and not peer and not suite and not tooling

.PHONY: test test-fast report docs peer-env-background bench bench-history bench-compare clean venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# what the package is built from: a change reinstalls it
BUILD_INPUTS := $(BIN)/python setup.py pyproject.toml $(shell find slr baselines -name '*.pyx' -o -name '*.pxd' -o -name '*.h')
# `make report` installs only what the comparison suite runs (REPORT_EXTRAS), not the test,
# documentation and benchmark tools (a third of the installed files); the full install satisfies
# it too, and `make test` after `make report` adds the rest
REPORT_EXTRAS := suite,lightgbm,distributed
ALL_EXTRAS    := test,bench
REPORT_STAMP  := $(VENV)/.installed-report

# pip compiles the installed modules to bytecode on one core (20 of its 70 s); compileall does it
# on every core and leaves out the packages' own test suites (a third of the sources), which
# nothing here imports; like pip it leaves a file that does not compile to fail when imported
define install
	$(BIN)/python -m pip install --quiet --no-compile -e ".[$(1)]"
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/' \
	    $$($(BIN)/python -c "import sysconfig; print(sysconfig.get_path('purelib'))") >/dev/null || true
endef

$(STAMP): $(BUILD_INPUTS)
	$(call install,$(ALL_EXTRAS))
	touch $(STAMP) $(REPORT_STAMP)

$(REPORT_STAMP): $(BUILD_INPUTS)
	$(call install,$(REPORT_EXTRAS))
	touch $(REPORT_STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS) -m "$(FAST)"

# the documentation site into docs/_build/html, warnings as errors, the gallery's examples run
docs: $(STAMP)
	$(BIN)/python -m sphinx -b html -W --keep-going docs docs/_build/html

# pystruct's Python 3.6 environment (a standard-library script) builds in the background while
# the virtual environment installs, mostly on the core pip leaves idle; the report's own check
# waits for it (a file lock) only if it is not done by then, and builds it if this failed
report: peer-env-background $(REPORT_STAMP)
	$(BIN)/slr report --quick --workers $(WORKERS) --out reports

peer-env-background:
	@$(PYTHON) baselines/peer/setup_env.py --quiet >/dev/null 2>&1 &

bench: $(STAMP)
	cd asv_benchmarks && ../$(BIN)/asv machine --yes && ../$(BIN)/asv run --python=same --quick --show-stderr

# asv across commits, in asv's own virtualenvs (asv_benchmarks/.asv/env: made once from PyPI or
# PIP_FIND_LINKS, reused for every commit; slr is built into it without an index).
N             ?= 5
FACTOR        ?= 1.2
HISTORY_BENCH ?= ^bench_inference\.|^bench_trees\.BoostingRound\.
HISTORY_ARGS  ?= --quick
export PIP_PREFER_BINARY := 1

# the last N commits of main (benchmarks already measured are kept), the HTML dashboard in
# asv_benchmarks/html/ and, where chromium is installed, its screenshot in reports/
bench-history: $(STAMP)
	cd asv_benchmarks && ../$(BIN)/asv machine --yes >/dev/null
	git rev-list --first-parent -n $(N) main | (cd asv_benchmarks && ../$(BIN)/asv run \
	    $(HISTORY_ARGS) --skip-existing --show-stderr --bench '$(HISTORY_BENCH)' HASHFILE:-) \
	    || [ $$? -eq 2 ] # 2: some benchmark failed on some commit, a gap in its graph
	cd asv_benchmarks && ../$(BIN)/asv publish
	$(BIN)/python asv_benchmarks/dashboard.py asv_benchmarks/html --optional-browser --screenshot reports/asv_dashboard.png

# asv continuous between main and the working tree (HEAD~1 and HEAD when the tree is clean);
# fails on a regression beyond FACTOR in the inference and tree benchmarks, suspects rerun
bench-compare: $(STAMP)
	cd asv_benchmarks && ../$(BIN)/asv machine --yes >/dev/null && ../$(BIN)/python regressions.py --factor $(FACTOR)

clean:
	rm -rf $(VENV) build docs/_build docs/api docs/auto_examples
	find slr baselines -name '*.so' -delete
	find slr baselines -name '*.c' -delete
