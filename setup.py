"""beamcrawl: a polite, web-scale crawler written as a batch Apache Beam pipeline."""

from setuptools import Extension, find_packages, setup

BEAM_VERSION = "2.77.0"  # must match Dockerfile

setup(
    name="beamcrawl",
    version="0.1.0",
    description="A polite, web-scale crawler written as a batch Apache Beam pipeline",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["beamcrawl", "beamcrawl.*"]),
    # The simhash of a page's words in C (core/content/textfp.py), and the tags the parse
    # limits' pre-scan reads and its walk over them (core/content/htmlbounds.py). Optional: where
    # no C compiler is at hand the install goes on, and the modules compute the same in Python
    # (slower: bench/README.md, "A compiled simhash", "The parse's tags and words compiled" and
    # "The pre-scan's walk compiled").
    ext_modules=[
        Extension("beamcrawl.core.content._simhash", ["beamcrawl/core/content/_simhash.c"], optional=True),
        Extension("beamcrawl.core.content._htmltags", ["beamcrawl/core/content/_htmltags.c"], optional=True),
        # The URL-shape check of every discovered link (core/urls/urlshape.py), likewise.
        Extension("beamcrawl.core.urls._urlshape", ["beamcrawl/core/urls/_urlshape.c"], optional=True),
        # The normalisation of plain links (core/urls/urlnorm.py), likewise.
        Extension("beamcrawl.core.urls._urlnorm", ["beamcrawl/core/urls/_urlnorm.c"], optional=True),
    ],
    install_requires=[
        f"apache-beam[gcp]=={BEAM_VERSION}",
        "google-cloud-bigtable>=2.20,<3",
        "pyarrow>=14,<27",
        "aiohttp>=3.12,<4",  # client middlewares: core/net/wire.py
        "yarl>=1.9,<2",  # the request target as held (an encoded URL): core/net/wire.py
        "warcio>=1.7.4,<2",
        "mmh3>=4,<6",
        "tldextract>=5,<6",
        "protego>=0.3,<1",
        "selectolax>=0.3.21,<2",
        "numpy>=1.24",
        "surt>=0.3.1,<1",  # SURT keys of the CDXJ index beside every WARC file
        # the WARC records' gzip members: zlib's format in 40-60% of its CPU (core/archive/warc_records.py)
        "zlib-ng>=0.5,<2",
        # Content-Encoding: br, decoded with an output limit (1.2 added it: no brotli bombs)
        "brotli>=1.2",
        # charsets of pages that declare none and are not UTF-8 (core/content/sniff.py)
        "charset-normalizer>=3,<4",
        # sitemaps and feeds: no external entities, no entity-expansion bombs (core/content/sitemaps.py)
        "defusedxml>=0.7.1,<1",
        # Web Bot Auth: Ed25519 request signatures and keys (core/net/botauth.py)
        "cryptography>=42",
        # live progress of a round on a terminal (pipelines/live.py)
        "tqdm>=4.66,<5",
        # `beamcrawl report`: PNG charts of the rounds, also drawn after each round
        "matplotlib>=3.7",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            # make test runs the suite on two workers (pytest -n 2)
            "pytest-xdist>=3.5",
            "hypothesis>=6",
            # the reference SimHash the vectorised one is checked against (tests and bench only)
            "simhash>=2.1,<3",
            # compiled text and URL parsers measured against ours (bench/compiled_parsers.py and
            # its smoke test; ada, a browser's URL parser, is also the reference test_urlnorm
            # reads IDN hosts against; the crawler does not use them: bench/README.md, #25)
            "resiliparse>=2,<3",
            "can-ada>=3,<4",
            "ada-url>=1.15,<5",
            # `make lint`: ruff's lint rules and formatter, mypy on the annotated packages
            "ruff>=0.17,<0.18",
            "mypy>=2.4,<3",
            "duckdb>=1.0",
            # the `duckdb` command the README's examples run (tests/docs/test_readme_examples.py)
            "duckdb-cli>=1.1",
            # notebooks/link_graph.ipynb, executed by tests/notebooks
            "matplotlib>=3.7",
            "nbclient>=0.10",
            "nbformat>=5.9",
            "ipykernel>=6.25",
            # `jupyter nbconvert --execute`, as README and `make notebook` run the notebook
            "nbconvert>=7",
            "jupyter_client>=8",
            # CDXJ checked against an independent indexer; Prometheus text checked by its parser
            "cdxj-indexer>=1.4,<2",
            "prometheus-client>=0.20",
            # Web Bot Auth signatures checked by an independent RFC 9421 verifier
            "http-message-signatures>=3,<4",
        ],
        # for analysts: notebooks/ and beamcrawl.analysis over a crawl's Parquet output
        # (jupyter nbconvert or papermill runs it headless; add jupyterlab or notebook to edit
        # it), and the `duckdb` command for quick queries (notebooks/README.md uses each)
        "notebooks": [
            "duckdb>=1.0",
            "duckdb-cli>=1.1",
            "matplotlib>=3.7",
            "ipykernel>=6.25",
            "jupyter_client>=8",
            "nbconvert>=7",
            "papermill>=2.6",
        ],
    },
    entry_points={"console_scripts": ["beamcrawl=beamcrawl.cli.main:main"]},
)
