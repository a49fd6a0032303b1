# One image for the Beam workers and the Flex Template launcher (Google's Flex Template sample
# pattern, dataflow/flex-templates/pipeline_with_dependencies). The three images below must
# share one Python version (3.11, tests/templates/test_dockerfile.py checks it), and the Beam
# version must match setup.py's BEAM_VERSION.
FROM python:3.11-slim

# The Beam SDK harness boot binary, from the SDK image of the same Beam and Python version:
# the image's entry point when Dataflow runs it as a worker.
COPY --from=apache/beam_python3.11_sdk:2.77.0 /opt/apache/beam /opt/apache/beam
# The Flex Template launcher, from Google's launcher image for the same Python: what runs
# when the image is launched as a template (it starts FLEX_TEMPLATE_PYTHON_PY_FILE).
COPY --from=gcr.io/dataflow-templates-base/python311-template-launcher-base:latest \
    /opt/google/dataflow/python_template_launcher /opt/google/dataflow/python_template_launcher

WORKDIR /template
# A C compiler for the package's four extensions (the simhash, core/content/_simhash.c, the
# parse limits' tokenizer, core/content/_htmltags.c, the URL-shape check,
# core/urls/_urlshape.c, and the normalisation of plain links, core/urls/_urlnorm.c): built
# here, and again where a worker installs the staged package. Without it the install still
# succeeds and the same fingerprints, tags, verdicts and URLs are computed in Python, several
# times slower.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
# Dependencies first, pinned (`make requirements` writes the file from setup.py), in a layer
# that a code change does not rebuild.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
# Then the code, without touching the dependencies; pip check fails the build on a conflict.
COPY setup.py README.md ./
COPY beamcrawl ./beamcrawl
RUN pip install --no-cache-dir --no-deps -e . && pip check

# The round's entry file (templates/ has the spec), and the package's setup file, which the
# launcher passes as --setup_file so Beam stages this very code to the workers.
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/beamcrawl/pipelines/template.py
ENV FLEX_TEMPLATE_PYTHON_SETUP_FILE=/template/setup.py

# Beam installs the staged package (the setup file above) on workers whose image already has
# every dependency: no resolving at worker start-up.
ENV PIP_NO_DEPS=True

# Workers start through Beam's boot binary (the launcher is started by Dataflow by path).
ENTRYPOINT ["/opt/apache/beam/boot"]
