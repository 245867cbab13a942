# The gateway, the accounting worker, the operator, the MCP front door and the CLI (one image,
# different commands).
#   docker build -f docker/worldserve.Dockerfile -t ghcr.io/worldserve/worldserve:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services services
COPY operators operators
RUN pip install --no-cache-dir --prefix=/install ".[operator,mcp]"

FROM python:3.11-slim
COPY --from=build /install /usr/local
COPY models/worldserve-tiny-moe/chat_template.jinja /opt/worldserve/models/worldserve-tiny-moe/
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin worldserve
USER 10001
ENV PYTHONUNBUFFERED=1 \
    WORLDSERVE_GATEWAY_HOST=0.0.0.0 \
    WORLDSERVE_MODEL_DIR=/opt/worldserve/models/worldserve-tiny-moe
EXPOSE 50051
# Works with a read-only root filesystem: nothing is written outside /tmp.
CMD ["python", "-m", "worldserve.gateway.server"]
