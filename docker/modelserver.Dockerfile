# The project's model server: PyTriton (bundled tritonserver) + transformers, or vLLM on GPUs.
#   docker build -f docker/modelserver.Dockerfile -t ghcr.io/worldserve/worldserve-modelserver:0.1.0 .
# For GPUs build FROM an NVIDIA CUDA runtime image and add "vllm" to the install.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services services
COPY operators operators
RUN pip install --no-cache-dir "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
 && pip install --no-cache-dir ".[model]"
COPY models /opt/worldserve/models
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin worldserve
USER 10001
ENV PYTHONUNBUFFERED=1 \
    WORLDSERVE_MODEL_DIR=/opt/worldserve/models/worldserve-tiny-moe \
    WORLDSERVE_TRITON_URL=0.0.0.0:8001
EXPOSE 8000 8001 8002
CMD ["python", "-m", "worldserve.modelserver.main"]
