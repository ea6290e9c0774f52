# gang-scheduler container image.
#
#   docker build -t ghcr.io/gang-scheduler/gang-scheduler:0.1.0 .
#
# (that registry path is the placeholder deploy/deployment.yaml uses: push to your own and
# change the image there). The image runs as the unprivileged user 65532 and never writes
# outside /tmp, so it works with readOnlyRootFilesystem: true and an emptyDir on /tmp.

# Build stage: install the package and its dependencies into a virtualenv that is copied whole
# into the runtime stage (same path, so the console script's shebang stays valid).
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# .dockerignore lets in only pyproject.toml, the README/LICENSE and the three packages.
COPY . .
# pip compiles the bytecode here, at build time: at run time nothing can be written next to
# the sources.
RUN pip install --no-cache-dir .

FROM python:3.11-slim
RUN groupadd --system --gid 65532 gang-scheduler \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin gang-scheduler
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
WORKDIR /tmp
USER 65532:65532
# /metrics, /healthz, /readyz
EXPOSE 8080
ENTRYPOINT ["gang-scheduler"]
CMD ["--help"]
