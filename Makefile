# Two commands do everything on a fresh machine with Python >= 3.11 and make:
#   make demo   create .venv if missing, install, run the main job on the bundled sample
#   make test   same install, then the whole test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install bench clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ope needs Python >= 3.11; set PYTHON=python3.11 or newer")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/ope demo

test: install
	$(PY) -m pytest

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
