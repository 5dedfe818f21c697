# The README's two commands: `make report` (the main job) and `make test`.
# Both create a virtual environment in the checkout and install the package into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test report bench clean venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.py pyproject.toml $(shell find slr baselines -name '*.pyx' -o -name '*.pxd')
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/pytest

report: $(STAMP)
	$(BIN)/slr report --quick --out reports

bench: $(STAMP)
	cd asv_benchmarks && ../$(BIN)/asv machine --yes && ../$(BIN)/asv run --python=same --quick --show-stderr

clean:
	rm -rf $(VENV) build
	find slr baselines -name '*.so' -delete
	find slr baselines -name '*.c' -delete
