# privrank image: slim, non-root; by default applies migrations, then serves (the API).
#   docker build -t privrank .
#   docker run -p 8000:8000 -e DATABASE_URL=postgresql://user:pass@db:5432/privrank \
#              -e PRIVRANK_ADMIN_KEY=change-me privrank
# The same image runs a job worker (with REDIS_URL, and PRIVRANK_JOB_QUEUE=rq on the API):
#   docker run -e DATABASE_URL=… -e REDIS_URL=redis://redis:6379/0 privrank privrank worker
# Without DATABASE_URL the SQLite database lives in the /data volume. deploy/compose.yaml
# runs two API instances, a worker, PostgreSQL, Redis and Caddy from this image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DATABASE_URL=sqlite:////data/privrank.db

RUN useradd --create-home --uid 10001 privrank \
    && mkdir -p /data && chown privrank /data

WORKDIR /srv/privrank
# A regular (not editable) install: the pages and the migrations are inside the package,
# so the source tree is not needed at run time and is removed.
COPY pyproject.toml README.md ./
COPY app ./app
COPY static ./static
COPY migrations ./migrations
RUN pip install . && cd / && rm -rf /srv/privrank

WORKDIR /data
USER privrank
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz').status == 200 else 1)"
# `privrank serve` applies the migrations, then starts uvicorn.
CMD ["privrank", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
