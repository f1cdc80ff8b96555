"""A JSON snapshot of a view: the spec, the tokens and the numbers computed from them.

Loading a snapshot gives back the spec; recomputing it must reproduce the stored numbers
(`compare` reports the largest difference), so a snapshot is both a record and a check.
"""
from __future__ import annotations

import json
import math

import torch

from .analysis import Analysis
from .errors import UserError
from .spec import AttentionSpec

FORMAT = "attention-explorer/snapshot@1"
MAX_MATRIX_CELLS = 1_000_000   # matrices are stored only up to this many heads x n x n cells
MAX_SNAPSHOT_BYTES = 50_000_000


def _rounded(t: torch.Tensor) -> list:
    return [round(x, 7) if math.isfinite(x) else None for x in t.flatten().tolist()]


def snapshot(a: Analysis) -> dict:
    """Everything needed to reproduce and check the view, as plain JSON types."""
    data = {
        "format": FORMAT,
        "spec": a.spec.to_query(),
        "tokens": list(a.tokens),
        "shape": [a.heads, a.n, a.n],
        "metrics": {
            "scaled": {k: _rounded(v) for k, v in a.scaled_metrics.items()},
            "unscaled": {k: _rounded(v) for k, v in a.unscaled_metrics.items()},
        },
    }
    if a.heads * a.n * a.n <= MAX_MATRIX_CELLS:
        data["weights"] = {"scaled": _rounded(a.scaled.weights),
                           "unscaled": _rounded(a.unscaled.weights)}
    return data


def dumps(a: Analysis) -> bytes:
    return json.dumps(snapshot(a), ensure_ascii=False).encode("utf-8")


def load(raw: bytes) -> tuple[AttentionSpec, dict]:
    """The spec stored in a snapshot file, and the parsed snapshot; UserError if unusable."""
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise UserError("snapshot.too_big", limit=MAX_SNAPSHOT_BYTES // 1_000_000)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UserError("snapshot.not_json") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("spec"), dict):
        raise UserError("snapshot.not_snapshot")
    spec, problems = AttentionSpec.parse_query({str(k): str(v) for k, v in data["spec"].items()})
    if problems:
        raise UserError("snapshot.bad_spec", detail=problems[0])
    return spec, data


def compare(a: Analysis, data: dict) -> float:
    """Largest absolute difference between a recomputed Analysis and a snapshot's numbers."""
    stored = snapshot(a)
    if stored["tokens"] != data.get("tokens") or stored["shape"] != data.get("shape"):
        return math.inf
    pairs = [(stored["metrics"][s][k], data["metrics"][s][k])
             for s in ("scaled", "unscaled") for k in stored["metrics"][s]]
    if "weights" in data and "weights" in stored:
        pairs += [(stored["weights"][s], data["weights"][s]) for s in ("scaled", "unscaled")]
    worst = 0.0
    for mine, theirs in pairs:
        if len(mine) != len(theirs):
            return math.inf
        for x, y in zip(mine, theirs):
            if (x is None) != (y is None):
                return math.inf
            if x is not None:
                worst = max(worst, abs(x - y))
    return worst
