# The plait image: the package with the Ray extra on a slim Python, for the Ray head,
# the Ray workers and the `plait worker --runtime ray` service of docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RAY_USAGE_STATS_ENABLED=0

WORKDIR /app
COPY pyproject.toml README.md ./
COPY plait ./plait
RUN pip install '.[ray]'

# Runs' tools work here unless a run pins a workspace of its own.
WORKDIR /work
CMD ["plait", "--help"]
