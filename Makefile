# beamcrawl: `make demo` crawls the synthetic web; `make test` runs the whole suite.
# Both create the virtualenv and install everything on a fresh machine (pip caches wheels).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip wheel
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/beamcrawl demo

test: install
	$(PY) -m pytest -q tests

bench: install
	$(PY) bench/demo_throughput.py

clean:
	rm -rf demo-out build *.egg-info .pytest_cache
