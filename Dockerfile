# Attention Explorer: a CPU-only image for a hosted demo.
#   docker build -t attention-explorer . && docker run -p 8501:8501 attention-explorer
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

WORKDIR /app

# requirements-cpu.txt: the pins of requirements.txt, with torch's CPU build from the
# PyTorch CPU index (on Linux, PyPI's torch is the ~2.5 GB CUDA build).
COPY requirements-cpu.txt requirements-nodeps.txt ./
RUN pip install -r requirements-cpu.txt && pip install --no-deps -r requirements-nodeps.txt

RUN useradd --create-home --uid 1000 explorer
COPY --chown=explorer:explorer . .
USER explorer

# The "Is sharper better?" page's default seed ships with the code (attention/data/experiments,
# keyed by the code that trains it); if those files are stale, it is trained here once and kept
# on disk, so a freshly started demo shows it at once either way.
ENV ATTENTION_EXPLORER_CACHE=/home/explorer/.cache/attention-explorer
RUN python -m attention.files.experiment_cache 0

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
  CMD python -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status != 200)"

# Safe mode for a shared server: nothing here sets ATTENTION_EXPLORER_LOCAL_MODELS (or any
# other variable that opens folders), so visitors load the bundled model and the allow-list
# only. Offer more models with `docker run -e ATTENTION_EXPLORER_MODELS=gpt2,...` (README, Deploy).
# The app's first page run starts its warm-up (imports, model, default results).
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
