# One image for the Beam workers and the Flex Template launcher (Google's Flex Template
# sample pattern). The Beam version must match setup.py's BEAM_VERSION.
FROM python:3.11-slim

# The Beam SDK harness boot binary, from the SDK image of the same Beam and Python version.
COPY --from=apache/beam_python3.11_sdk:2.77.0 /opt/apache/beam /opt/apache/beam

WORKDIR /app
# Dependencies first, so code changes do not rebuild the dependency layer.
COPY setup.py README.md ./
COPY beamcrawl ./beamcrawl
RUN pip install --no-cache-dir -e . && pip check

# The round's entry point for a Flex Template launch (templates/ has the spec).
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/app/beamcrawl/pipelines/template.py

# Workers start through Beam's boot binary.
ENTRYPOINT ["/opt/apache/beam/boot"]
