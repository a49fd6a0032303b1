# beamcrawl: `make demo` crawls the synthetic web; `make test` runs the whole suite.
# Both create the virtualenv and install everything on a fresh machine (pip caches wheels).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install emulator prism flink flink-cluster flink-cluster-stop requirements demo notebook lint lint-check test bench bench-compare clean

install: $(STAMP)

# setuptools warns on every editable install that a folder named like the package may shadow
# it; here that folder is the package itself (the install points at it), so that box is hidden.
$(STAMP): setup.py beamcrawl/core/content/_simhash.c beamcrawl/core/content/_htmltags.c beamcrawl/core/urls/_urlshape.c beamcrawl/core/urls/_urlnorm.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing beamcrawl and its dependencies into $(VENV) (quiet; a minute or two on a fresh machine) ..."
	$(PY) -m pip install --quiet --upgrade pip wheel
	PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The Bigtable emulator: the Cloud SDK's cbtemulator where present, else built once from its
# Go module with the machine's Go toolchain (cached in ~/.cache/beamcrawl/bin).
emulator: install
	$(PY) -m beamcrawl.stores.emulator path

# Prism, Beam's portable runner, built once from its Go module (cached likewise): the
# suite runs a round on it, out of process, as a cluster would.
prism: install
	$(PY) -c "from beamcrawl.pipelines.runners import prism_binary; print(prism_binary())"

# Flink's job server for local rounds: Beam's matching jar where Maven serves it, else the
# Flink 1.16 job server of Beam 2.50 from its Maven classpath (cached in ~/.cache/beamcrawl/flink).
flink: install
	$(PY) -m beamcrawl.pipelines.flink

# A Flink 1.16 session cluster on this machine from those jars (a JobManager, two TaskManagers
# and an SDK worker pool, all on loopback; README "Running on your own Flink cluster"). Its
# SDK workers get this environment: set BIGTABLE_EMULATOR_HOST (or credentials) first.
FLINK_CLUSTER_DIR ?= flink-cluster
flink-cluster: flink
	$(VENV)/bin/beamcrawl flink-cluster start --dir $(FLINK_CLUSTER_DIR)

flink-cluster-stop: install
	$(VENV)/bin/beamcrawl flink-cluster stop --dir $(FLINK_CLUSTER_DIR)

# The image's pinned dependencies (Dockerfile), from setup.py and the versions installed here.
requirements: install
	$(PY) templates/pin_requirements.py > requirements.txt

demo: install
	$(VENV)/bin/beamcrawl demo

# notebooks/link_graph.ipynb executed on demo-out/ (crawled first if missing), written as
# demo-out/link_graph.html and demo-out/link_graph.ipynb. The path is absolute: the
# notebook's kernel runs in notebooks/.
notebook: install
	test -d demo-out/pages || $(MAKE) demo
	BEAMCRAWL_CRAWL_OUT=$(CURDIR)/demo-out $(VENV)/bin/jupyter nbconvert --execute --to notebook \
	    --output-dir demo-out --output link_graph notebooks/link_graph.ipynb
	$(VENV)/bin/jupyter nbconvert --to html --output-dir demo-out demo-out/link_graph.ipynb
	@echo "notebook: demo-out/link_graph.html (and the executed demo-out/link_graph.ipynb)"

# ruff (lint and format) and mypy, configured in pyproject.toml; .ci/run runs it before the tests.
lint: lint-check
	$(VENV)/bin/ruff format --check .

# The checks that do not depend on formatting: ruff's lint rules and mypy.
lint-check: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two workers, a module each at a time, the longest modules first (tests/conftest.py); then the
# tests that need the machine to themselves (marked solo), alone. Each run ends with its
# slowest tests, so that a suite creeping towards its 30 minutes shows where.
test: install emulator prism flink
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 -m "not solo" tests
	$(PY) -m pytest -q --durations=5 -m solo tests

bench: install
	$(PY) bench/demo_throughput.py

# beamcrawl side by side with Scrapy (own venv, never a dependency) and a floor crawler on
# a 3,000-host simweb; ~11 minutes, loopback only. Not part of `make test`.
bench-compare: install
	$(PY) bench/compare.py

clean:
	rm -rf demo-out build *.egg-info .pytest_cache
