# The OpenEnv front door (`python -m worldserve.frontends.openenv`): its own image, because
# openenv pins packages the other parts cannot share (docs/INTEGRATIONS.md).
#   docker build -f docker/openenv.Dockerfile -t ghcr.io/worldserve/worldserve-openenv:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services services
COPY operators operators
RUN pip install --no-cache-dir --prefix=/install ".[openenv]"

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin worldserve
USER 10001
ENV PYTHONUNBUFFERED=1 \
    WORLDSERVE_OPENENV_HOST=0.0.0.0
EXPOSE 8932
CMD ["python", "-m", "worldserve.frontends.openenv"]
