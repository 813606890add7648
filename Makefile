# Two commands do everything on a fresh machine with Python >= 3.11 and make:
#   make demo   create .venv if missing, install from the lock file, run the main job on the bundled sample
#   make test   same install, then the fast tests: tests/ and the doctests of ope/, without the
#               tests marked slow (long statistical validation, installs, browser, notebooks),
#               on every core (pytest-xdist: -n auto); warnings are errors (pyproject.toml)
# Also:
#   make test-all      every test, slow ones included (what CI runs)
#   make docs          the documentation site into site/ (mkdocs build --strict: warnings are errors)
#   make lint          ruff check (pyflakes and pycodestyle errors) and ruff format --check (the
#                      layout); config in pyproject.toml; `ruff format ope tests benchmarks docs` fixes it
#   make typecheck     mypy on ope/ at the strictness of [tool.mypy] in pyproject.toml (must be clean)
#   make test-latest   the suite on the newest releases that pyproject.toml allows (own venv, no lock)
#   make lock          regenerate requirements/dev.lock after changing dependencies in pyproject.toml
#                      (needs the package index: uv resolves .[dev] for every platform)
#   make wheel         build the wheel a user's `pip install ope-toolkit` installs (into build/wheel/;
#                      the bundled sample is package data in it); tests/test_install.py installs it
#                      into a fresh venv and runs `ope demo` from outside the repository
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
LOCK := requirements/dev.lock
LATEST_VENV ?= .venv-latest

.PHONY: demo test test-all docs lint typecheck test-latest install lock wheel bench clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ope needs Python >= 3.11; set PYTHON=python3.11 or newer")'
	$(PYTHON) -m venv $(VENV)

# the lock pins every transitive dependency of .[dev]; ope itself is installed without resolving
$(STAMP): pyproject.toml $(LOCK) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/ope demo

test: install
	$(PY) -m pytest -m "not slow" -n auto

test-all: install
	$(PY) -m pytest

docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

test-latest:
	@test -x $(LATEST_VENV)/bin/python || $(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	$(LATEST_VENV)/bin/python -m pip list --format=freeze | grep -iE '^(numpy|pandas|scipy|scikit-learn|pyarrow|dask)=='
	$(LATEST_VENV)/bin/python -m pytest

lock: | $(PY)
	$(PY) -m pip install --quiet uv
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --no-emit-package ope-toolkit -o $(LOCK)
	printf '# compiled from pyproject.toml sha256 %s\n' "$$(sha256sum pyproject.toml | cut -c1-64)" | cat - $(LOCK) > $(LOCK).tmp && mv $(LOCK).tmp $(LOCK)

lint: install
	$(VENV)/bin/ruff check ope tests benchmarks docs
	$(VENV)/bin/ruff format --check ope tests benchmarks docs

typecheck: install
	$(PY) -m mypy

wheel: | $(PY)
	$(PY) -m pip wheel --no-deps --quiet -w build/wheel .
	@ls build/wheel/ope_toolkit-*.whl

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(LATEST_VENV) build site *.egg-info .pytest_cache
