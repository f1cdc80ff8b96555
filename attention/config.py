"""Every limit and cap of the project, and the policy of what a visitor may load, in one place.

Limits protect a shared server's memory and CPU: each is the largest input one request may
bring, and a larger one is refused with a sentence (never cut silently, never run for minutes).
The model policy is read from the environment on every call, so a deployer sets it without
code:

    ATTENTION_EXPLORER_ALLOW_DOWNLOADS=1    fetch Hub ids (off: only the local HF cache)
    ATTENTION_EXPLORER_MAX_PARAMS=500000000 largest model, counted from its config before any
                                            weight is read
    ATTENTION_EXPLORER_MODELS=a,b,c         allow-list of sources; the bundled model is always
                                            allowed
"""
from __future__ import annotations

import os
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"     # files that ship with the package

# ---- pasted tokens and the toy model (attention.tokens, attention.spec) -----------------------
MAX_TOKENS = 2048          # the longest sequence the dashboard computes
MAX_TOKEN_CHARS = 100      # a longer "token" is almost surely a paste gone wrong
MAX_INPUT_CHARS = 200_000  # raw text is refused before parsing beyond this
LIMITS = {                 # the spec's numeric fields; the sidebar's widgets use the same ranges
    "d_model": (1, 1024),
    "d_k": (1, 1024),
    "heads": (1, 16),
    "seed": (0, 2**31 - 1),
    "temperature": (0.01, 100.0),
    "layer": (0, 255),     # checked against the loaded model where it is loaded
}
MAX_MODEL_CHARS = 300      # a folder path or a Hub id
MAX_CELLS = 12 * MAX_TOKENS * MAX_TOKENS   # heads * n * n: 12 heads at the token limit
# Multiply-adds of the toy model's projections and score products, heads * n * d_k * (n +
# d_model): 12 heads at the token limit with d_k = d_model = 64. The same size with
# d_k = d_model = 1024 is 16x that work (about a minute of CPU on a 2-core server).
MAX_WORK = 12 * MAX_TOKENS * 64 * (MAX_TOKENS + 64)
SWEEP_MAX_TOKENS = 256     # the d_k sweep uses the first tokens only, so it stays fast at any n
SWEEP_MAX_HEADS = 4        # and at most 4 heads (its rows are means over heads)

# ---- files a visitor brings (attention.files.upload, attention.snapshot) ----------------------
UPLOAD_MAX_BYTES = 16 * 1024 * 1024     # per uploaded matrix file
UPLOAD_MAX_ABS = 1e15                   # |value| bound: q.k <= 1e30 * d_k stays finite in float32
UPLOAD_MAX_MATRIX_TOKENS = 512          # an uploaded matrix is drawn cell by cell (n x n rows)
SNAPSHOT_MAX_MATRIX_CELLS = 1_000_000   # a saved view stores matrices only up to this many cells
SNAPSHOT_MAX_BYTES = 50_000_000

# ---- real models (attention.models) ----------------------------------------------------------
BUNDLED = "all-MiniLM-L6-v2"
ENV_DOWNLOADS = "ATTENTION_EXPLORER_ALLOW_DOWNLOADS"
ENV_MAX_PARAMS = "ATTENTION_EXPLORER_MAX_PARAMS"
ENV_ALLOWED = "ATTENTION_EXPLORER_MODELS"
DEFAULT_MAX_PARAMS = 500_000_000
MODELS_KEPT = 2                 # non-bundled models kept in memory at once (the bundled one stays)
MAX_WEIGHT_CELLS = 2 ** 26      # layers * heads * n * n kept by one run (float32: 256 MB)
# The runs kept of every model, bounded by bytes: a run holds layers x heads x n x n weights
# and q, k, v (MiniLM: about 50 MB at 351 pieces, 90 MB at 512); eight sessions on the Model
# heads page kept 0.4 GB when runs were kept by count (bench/memory.py).
RUN_BYTES = 96 * 2**20
INTERVENTION_LINK_ITEMS = 64    # a link names at most this many (layer, head) interventions
INTERVENTION_LINK_CHARS = 2000
INTERVENTION_LINK_INDEX = 4095
COMPARE_MAX_SENTENCES = 8       # lines an embedding model compares (each one more forward pass)

# ---- importance (attention.importance) --------------------------------------------------------
IMPORTANCE_BATCH_TOKENS = 4096  # pieces per batched forward (copies x length)
# Occlusion runs n texts of n - 1 pieces per text (work grows as n^2 per text, about 10 forward
# passes' worth at 32 pieces): a page refuses longer texts, and more pieces over all texts,
# with a sentence instead of minutes of one CPU on a shared server.
IMPORTANCE_MAX_PIECES = 128     # pieces of one text
IMPORTANCE_MAX_TOTAL_PIECES = 384
FLOW_MAX_PIECES = 64            # longer texts get NaN flow: n * layers max-flows are too slow


def downloads_allowed() -> bool:
    """True when ATTENTION_EXPLORER_ALLOW_DOWNLOADS is 1/true/yes/on (off by default)."""
    return os.environ.get(ENV_DOWNLOADS, "").strip().lower() in ("1", "true", "yes", "on")


def max_params() -> int:
    """The parameter cap (ATTENTION_EXPLORER_MAX_PARAMS, default 500 M)."""
    raw = os.environ.get(ENV_MAX_PARAMS, "").strip().replace("_", "")
    return int(float(raw)) if raw else DEFAULT_MAX_PARAMS


def allowed_models() -> tuple[str, ...] | None:
    """The allow-list (ATTENTION_EXPLORER_MODELS, comma-separated), or None when unset."""
    raw = os.environ.get(ENV_ALLOWED, "").strip()
    return tuple(s.strip() for s in raw.split(",") if s.strip()) if raw else None
