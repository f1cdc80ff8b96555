"""A JSON snapshot of a view: the spec, the tokens and the numbers computed from them.

Loading a snapshot gives back the spec; recomputing it must reproduce the stored numbers
(`compare` reports the largest difference), so a snapshot is both a record and a check.
"""
from __future__ import annotations

import json
import math
from dataclasses import fields

import torch

from attention.analysis import Analysis
from attention.config import SNAPSHOT_MAX_BYTES as MAX_SNAPSHOT_BYTES
from attention.config import SNAPSHOT_MAX_MATRIX_CELLS as MAX_MATRIX_CELLS
from attention.errors import UserError
from attention.measures.rows import ROW_METRICS
from attention.spec import AttentionSpec

FORMAT = "attention-explorer/snapshot@1"


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
    """The spec stored in a snapshot file and the checked snapshot (every number a finite
    float or None, every list of the length its shape asks for); UserError if unusable, so
    that `compare` on what this returns never raises. The checks descend only into the
    fields a snapshot has, never recursively into whatever else a file holds."""
    if not isinstance(raw, (bytes, bytearray)):
        raise UserError("snapshot.not_json")
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise UserError("snapshot.too_big", limit=MAX_SNAPSHOT_BYTES // 1_000_000)
    text = _decode(bytes(raw))
    if not text.strip():
        raise UserError("snapshot.empty")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except _NotFinite as err:
        raise UserError("snapshot.json_constant", name=str(err)) from None
    except RecursionError:     # about a thousand nested [ or {: json stops before the stack
        raise UserError("snapshot.too_nested") from None
    except ValueError:
        raise UserError("snapshot.not_json") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError("snapshot.not_snapshot")
    return _checked(data)


class _NotFinite(ValueError):
    pass


def _no_constant(name: str):
    raise _NotFinite(name)                       # NaN, Infinity, -Infinity: not JSON numbers


def _decode(raw: bytes) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is allowed); UserError naming what it is instead."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw[:64]:
        raise UserError("snapshot.utf16")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError("snapshot.not_utf8", offset=err.start) from None


def _type_name(value) -> UserError:
    """The JSON type of a value, as interface text (the value itself is never echoed)."""
    kind = ("null" if value is None else "boolean" if isinstance(value, bool)
            else "number" if isinstance(value, (int, float)) else "text" if isinstance(value, str)
            else "list" if isinstance(value, list) else "object")
    return UserError(f"snapshot.type_{kind}")


def _need(value, kind: type, field: str, expected: str):
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UserError("snapshot.wrong_type", field=field, got=_type_name(value),
                        expected=UserError(f"snapshot.type_{expected}"))
    return value


def _field(data: dict, key: str, kind: type, expected: str, prefix: str = ""):
    if key not in data:
        raise UserError("snapshot.missing", field=prefix + key)
    return _need(data[key], kind, prefix + key, expected)


def _numbers(values, field: str, length: int) -> list:
    """A list of `length` finite numbers or nulls, as floats (None kept)."""
    _need(values, list, field, "list")
    if len(values) != length:
        raise UserError("snapshot.wrong_length", field=field, got=len(values), expected=length)
    out = []
    for i, x in enumerate(values):
        if x is None:
            out.append(None)
            continue
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise UserError("snapshot.bad_number", field=field, index=i, got=_type_name(x))
        try:
            x = float(x)
        except OverflowError:                    # an integer with hundreds of digits
            x = math.inf
        if not math.isfinite(x):
            raise UserError("snapshot.not_finite", field=f"{field}[{i}]")
        out.append(x)
    return out


def _variants(data: dict, key: str, names, length: int) -> dict:
    """{"scaled": {name: numbers}, "unscaled": ...}, or {"scaled": numbers, ...} if no names."""
    block = _field(data, key, dict, "object")
    out = {}
    for variant in ("scaled", "unscaled"):
        field = f"{key}.{variant}"
        if names is None:
            if variant not in block:
                raise UserError("snapshot.missing", field=field)
            out[variant] = _numbers(block[variant], field, length)
            continue
        inner = _field(block, variant, dict, "object", prefix=f"{key}.")
        out[variant] = {}
        for name in names:
            if name not in inner:
                raise UserError("snapshot.missing", field=f"{field}.{name}")
            out[variant][name] = _numbers(inner[name], f"{field}.{name}", length)
    return out


def _checked(data: dict) -> tuple[AttentionSpec, dict]:
    """The spec and a clean copy of the document; UserError for anything out of place."""
    params = _field(data, "spec", dict, "object")
    known = {f.name for f in fields(AttentionSpec)}       # others are ignored, as in a URL
    params = {k: v for k, v in params.items() if k in known}
    for key, value in params.items():                     # (only known names are echoed)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise UserError("snapshot.wrong_type", field=f"spec.{key}", got=_type_name(value),
                            expected=UserError("snapshot.type_text"))
    spec, problems = AttentionSpec.parse_query({k: str(v) for k, v in params.items()})
    if problems:
        raise UserError("snapshot.bad_spec", detail=problems[0])
    tokens = _field(data, "tokens", list, "list")
    if tokens != list(spec.tokens):
        raise UserError("snapshot.tokens_mismatch", n=len(spec.tokens))
    shape = _field(data, "shape", list, "list")
    n = len(tokens)
    heads = spec.heads
    if [type(x) for x in shape] != [int] * 3 or shape != [heads, n, n]:
        raise UserError("snapshot.bad_shape", heads=heads, n=n)
    clean = {"format": FORMAT, "spec": spec.to_query(), "tokens": tokens, "shape": shape,
             "metrics": _variants(data, "metrics", ROW_METRICS, heads * n)}
    if "weights" in data:
        if heads * n * n > MAX_MATRIX_CELLS:
            raise UserError("snapshot.too_many_cells", cells=heads * n * n,
                            limit=MAX_MATRIX_CELLS)
        clean["weights"] = _variants(data, "weights", None, heads * n * n)
    return spec, clean


def compare(a: Analysis, data: dict) -> float:
    """Largest absolute difference between a recomputed Analysis and a snapshot's numbers
    (math.inf where they do not line up). Never raises on a document from `load`, nor on a
    malformed one: anything out of place counts as a mismatch."""
    try:
        return _largest_difference(snapshot(a), data)
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError, IndexError):
        return math.inf


def _largest_difference(stored: dict, data: dict) -> float:
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
                worst = max(worst, abs(float(x) - float(y)))
    return worst if math.isfinite(worst) else math.inf
