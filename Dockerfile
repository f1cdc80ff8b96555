# Attention Explorer: a CPU-only image for a hosted demo (docs/deploy.md).
#   docker build -t attention-explorer . && docker run -p 8501:8501 attention-explorer
#   make image        the same on a machine with Docker or podman, with or without a registry
# BASE: any Debian-like image with python3 and its venv module (3.11: the shipped results are
# keyed by the Python version). scripts/image.sh passes a local one where no registry answers.
ARG BASE=python:3.11-slim

# ---- build: the venv, trimmed; the app, compiled; the shipped results checked --------------
FROM ${BASE} AS build
# requirements-cpu.txt: the pins of requirements.txt, with torch's CPU build from the PyTorch
# CPU index (on Linux, PyPI's torch is the ~2.5 GB CUDA build). scripts/image.sh passes
# requirements.txt where that index does not answer and pip's own configuration provides the
# CPU build; the check below fails the build if a CUDA build came all the same.
ARG REQUIREMENTS=requirements-cpu.txt
ENV PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN python3 -m venv /opt/venv
COPY requirements.txt requirements-cpu.txt requirements-nodeps.txt /tmp/req/
RUN pip install -r /tmp/req/${REQUIREMENTS} && pip install --no-deps -r /tmp/req/requirements-nodeps.txt
RUN python -c "import sys, torch; sys.exit('torch is a CUDA build: use requirements-cpu.txt' if torch.version.cuda else 0)"
# What only tests, C++ builds and the installer need, and what the app never imports (docs/
# deploy.md, "What the image holds"): torch's C++ test binaries, headers and test data, the
# packages' own test suites, Arrow Flight, pydeck (st.pydeck_chart), jieba's part-of-speech,
# keyword and Paddle modes (the app cuts words only), pip and setuptools; the symbol tables of
# torch's, Arrow's and tokenizers' own libraries (strip --strip-unneeded keeps what linking
# needs; not the auditwheel-patched ones in *.libs, which stripping breaks). Then every
# package the app imports is imported once, so a trim too far fails the build.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils >/dev/null && \
    site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") && \
    find "$site/torch/bin" -mindepth 1 ! -name torch_shm_manager -delete && \
    rm -rf "$site/torch/include" "$site/torch/test" "$site/torch/share/cmake" \
           "$site/pyarrow/include" "$site"/pyarrow/*flight* "$site"/pyarrow/src \
           "$site/pydeck" "$site/jieba/posseg" "$site/jieba/analyse" "$site/jieba/lac_small" && \
    find "$site" -depth -type d -name tests ! -path "*/torch/testing/*" -exec rm -rf {} + && \
    strip --strip-unneeded "$site"/torch/lib/libtorch_cpu.so "$site"/torch/lib/libtorch_python.so \
          "$site"/pyarrow/lib*.so.* "$site"/tokenizers/*.so && \
    pip uninstall -q -y pip setuptools && \
    python -c "import torch, pyarrow.parquet, pandas, scipy.optimize, sklearn, openTSNE, captum.attr, \
matplotlib.pyplot, transformers, tokenizers, safetensors, gguf, accelerate, streamlit, altair, jieba, vl_convert"
WORKDIR /app
COPY . .
# The "Is sharper better?" page's default seed ships with the code (attention/data/experiments,
# keyed by the code that trains it); if those files are stale, it is trained here once into the
# same folder, so a freshly started container shows it at once either way. Then every module
# of the app is compiled (a read-only container cannot write its bytecode).
# SmolLM2's GGUF is converted once, here, to float32 safetensors in /opt/models (read-only
# at run time, ATTENTION_EXPLORER_PREBUILT): a cold container converts nothing. The GGUF stays:
# the converted folder is found by its hash.
RUN ATTENTION_EXPLORER_CACHE=/app/attention/data/experiments python -m attention.experiment.store 0 && \
    HF_HUB_OFFLINE=1 python -m attention.models convert --out /opt/models && \
    python -m compileall -q --invalidation-mode unchecked-hash /app && \
    useradd --create-home --uid 1000 explorer

# ---- run: the venv and the app, owned by root, read-only to the user who runs them ----------
FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    ATTENTION_EXPLORER_CACHE=/tmp/attention-explorer \
    ATTENTION_EXPLORER_PREBUILT=/opt/models \
    MPLCONFIGDIR=/tmp/matplotlib \
    MALLOC_ARENA_MAX=2
# MALLOC_ARENA_MAX: two malloc heaps from the first thread on (attention/bounded.py caps them
# too, but only once the app's first page has run): 8 visitors running SmolLM2 took the
# server to 2.43-2.60 GB peak with it, 2.78 GB without (bench/memory.py --lm, one run each).
# What visitors create (the results cache, matplotlib's and jieba's caches) goes to /tmp: the
# container runs with a read-only root filesystem and a small tmpfs there (docs/deploy.md).
# No RUN in this stage: the user (uid 1000, the one a Hugging Face Space runs as) comes from
# the build stage, so nothing a build mounts for pip (scripts/image.sh) leaves a trace here.
COPY --from=build /etc/passwd /etc/group /etc/
COPY --from=build --chown=explorer:explorer /home/explorer /home/explorer
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/models /opt/models
COPY --from=build /app /app
WORKDIR /app
USER explorer

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
  CMD python -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status != 200)"

# Safe mode for a shared server: nothing here sets ATTENTION_EXPLORER_LOCAL_MODELS (or any
# other variable that opens folders), so visitors load the bundled models and the allow-list
# only. Offer more models with `docker run -e ATTENTION_EXPLORER_MODELS=gpt2,...` (README, Deploy).
# The app's first page run starts its warm-up (imports, model, default results).
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
