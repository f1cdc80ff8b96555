"""Bring your own attention: parse uploaded Q/K(/V) or a ready attention matrix.

Files are `.npy` (read with allow_pickle=False) or `.csv` (one row per token, one column per
dimension; an optional header row, and an optional first column named "token" that holds the
tokens). A .npy file may hold one head (n, d) or several (heads, n, d). Every problem raises
an UploadError whose message says what was wrong and what to do. Pure: bytes in, tensors out.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from attention.analysis import Analysis, analyze_qkv
from attention.errors import UserError
from attention.files.export import csv_bytes
from attention.config import LIMITS, MAX_CELLS, MAX_TOKENS, MAX_WORK
from attention.config import UPLOAD_MAX_ABS as MAX_ABS
from attention.config import UPLOAD_MAX_BYTES as MAX_BYTES
from attention.config import UPLOAD_MAX_MATRIX_TOKENS as MAX_MATRIX_TOKENS
from attention.spec import AttentionSpec
from attention.text.tokens import parse_tokens

MAX_HEADS = LIMITS["heads"][1]        # 16
MAX_DIM = LIMITS["d_k"][1]            # 1024
ROW_SUM_TOLERANCE = 1e-3              # attention rows must sum to 1 within this
EXTENSIONS = ("npy", "csv")


class UploadError(UserError):
    """An uploaded file the dashboard cannot use; the message is written for the user."""


@dataclass(frozen=True)
class Table:
    """One parsed file: values (heads, rows, cols) and the tokens a CSV named, if any."""
    name: str
    values: np.ndarray                 # (heads, rows, cols) float32
    tokens: tuple[str, ...] | None


def read_file(name: str, data: bytes) -> Table:
    """A .npy or .csv upload as a (heads, rows, cols) float32 array."""
    if len(data) > MAX_BYTES:
        raise UploadError("model.upload_too_big", name=name, mb=len(data) / 2**20,
                          limit=MAX_BYTES // 2**20)
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext == "npy":
        values, tokens = _read_npy(name, data), None
    elif ext == "csv":
        values, tokens = _read_csv(name, data)
    else:
        raise UploadError("model.upload_extension", name=name, allowed=", ".join(EXTENSIONS))
    if values.ndim == 2:
        values = values[None]                                            # (1, rows, cols)
    if values.ndim != 3 or 0 in values.shape:
        raise UploadError("model.upload_ndim", name=name, shape=_shape(values.shape))
    if not np.isfinite(values).all():
        raise UploadError("model.upload_not_finite", name=name)
    largest = float(np.abs(values).max())
    if largest > MAX_ABS:   # q.k would overflow float32 (inf scores), or the cast itself would
        raise UploadError("model.upload_huge_values", name=name, largest=f"{largest:.3g}",
                          limit=f"{MAX_ABS:.0e}")
    heads, rows, cols = values.shape
    if heads > MAX_HEADS or rows > MAX_TOKENS or cols > max(MAX_DIM, MAX_TOKENS):
        raise UploadError("model.upload_too_large", name=name, shape=_shape(values.shape),
                          heads=MAX_HEADS, tokens=MAX_TOKENS)
    return Table(name=name, values=values.astype(np.float32), tokens=tokens)


def _shape(shape) -> str:
    return " × ".join(str(s) for s in shape)


def _read_npy(name: str, data: bytes) -> np.ndarray:
    """The array of a .npy file; its header is checked before any memory is set aside, so a
    header announcing a huge array, pickled objects or more bytes than the file holds is
    refused without loading."""
    if not data.startswith(b"\x93NUMPY"):                               # not a .npy at all
        is_pickle = data[:1] == b"\x80"                                  # pickle protocol 2+
        raise UploadError("model.upload_pickle" if is_pickle else "model.upload_bad_npy",
                          name=name)
    buf = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buf)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}[version]
        shape, _, dtype = read_header(buf)
    except (ValueError, KeyError, OSError, EOFError, SyntaxError, TypeError):
        raise UploadError("model.upload_bad_npy", name=name) from None
    if dtype.hasobject:
        raise UploadError("model.upload_pickle", name=name)
    if dtype.kind not in "biuf":
        raise UploadError("model.upload_npy_dtype", name=name, dtype=str(dtype))
    if len(shape) == 0:
        raise UploadError("model.upload_scalar", name=name)
    expected = math.prod(shape) * dtype.itemsize
    if expected != len(data) - buf.tell():
        raise UploadError("model.upload_npy_size", name=name, shape=_shape(shape),
                          expected=expected, got=len(data) - buf.tell())
    try:
        values = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as err:
        if "pickle" in str(err).lower():
            raise UploadError("model.upload_pickle", name=name) from None
        raise UploadError("model.upload_bad_npy", name=name) from None
    except (OSError, EOFError):
        raise UploadError("model.upload_bad_npy", name=name) from None
    return values.astype(np.float64)


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except (ValueError, OverflowError):
        return None
    return value


def _read_csv(name: str, data: bytes) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Rows of numbers; an optional all-text header; a first column "token" keeps tokens."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data:    # UTF-16 and the like
        raise UploadError("model.upload_encoding", name=name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UploadError("model.upload_encoding", name=name) from None
    rows = []
    try:
        for r in csv.reader(io.StringIO(text)):
            if any(c.strip() for c in r):
                rows.append(r)
            if len(rows) > MAX_TOKENS + 1:        # a header and one row per token at most
                raise UploadError("model.upload_csv_rows", name=name, tokens=MAX_TOKENS)
    except csv.Error:                             # a cell over csv's field limit, and the like
        raise UploadError("model.upload_bad_csv", name=name) from None
    if not rows:
        raise UploadError("model.upload_empty", name=name)
    header = rows[0]
    has_header = all(_number(c) is None for c in header)
    token_col = has_header and header[0].strip().lower() == "token"
    body = rows[1:] if has_header else rows
    if not body:
        raise UploadError("model.upload_empty", name=name)
    width = len(body[0])
    values, tokens = [], []
    for r, row in enumerate(body):
        line = r + 1 + int(has_header)                                   # 1-based line in the file
        if len(row) != width:
            raise UploadError("model.upload_ragged", name=name, line=line, cells=len(row),
                              width=width)
        cells = row[1:] if token_col else row
        numbers = []
        for c, cell in enumerate(cells):
            value = _number(cell.strip())
            if value is None:
                raise UploadError("model.upload_text_cell", name=name, line=line,
                                  column=c + 1 + int(token_col), cell=cell.strip()[:30])
            numbers.append(value)
        values.append(numbers)
        if token_col:
            tokens.append(row[0].strip())
    return np.array(values, dtype=np.float64), (tuple(tokens) if token_col else None)


def resolve_tokens(n: int, typed: str, tables: list[Table],
                   fallback: tuple[str, ...]) -> tuple[str, ...]:
    """The tokens of an upload: typed into the box, else a CSV's token column, else the
    sidebar's tokens when their count fits; UploadError when the count does not match n."""
    if typed.strip():
        tokens = tuple(parse_tokens(typed))
        source = "typed"
    else:
        named = next((t.tokens for t in tables if t.tokens is not None), None)
        tokens, source = (named, "csv") if named is not None else (fallback, "sidebar")
    if len(tokens) != n:
        raise UploadError("model.upload_tokens_count", n=n, count=len(tokens),
                          source=UserError(f"model.upload_tokens_{source}"))
    return tokens


def qkv(q: Table, k: Table, v: Table | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K (and V, else zeros of width 1) as tensors (heads, n, d), shapes checked."""
    if q.values.shape != k.values.shape:
        raise UploadError("model.upload_qk_shape", q=_shape(q.values.shape),
                          k=_shape(k.values.shape))
    heads, n, d_k = q.values.shape
    if d_k > MAX_DIM:
        raise UploadError("model.upload_too_large", name=q.name, shape=_shape(q.values.shape),
                          heads=MAX_HEADS, tokens=MAX_TOKENS)
    # A small file can still ask for a lot: float16 Q and K of 16 x 2048 x 1 are 64 kB.
    if heads * n * n > MAX_CELLS:
        raise UploadError("errors.spec_cells", heads=heads, n=n,
                          max_heads=max(1, MAX_CELLS // (n * n)))
    if heads * n * n * d_k > MAX_WORK:
        raise UploadError("errors.upload_work", heads=heads, n=n, d_k=d_k,
                          max_d_k=max(1, MAX_WORK // (heads * n * n)))
    if v is not None and v.values.shape[:2] != (heads, n):
        raise UploadError("model.upload_v_shape", v=_shape(v.values.shape), heads=heads, n=n)
    q_t = torch.from_numpy(q.values)                                     # (heads, n, d_k)
    k_t = torch.from_numpy(k.values)                                     # (heads, n, d_k)
    v_t = torch.from_numpy(v.values) if v is not None else torch.zeros(heads, n, 1)  # (heads, n, d_v)
    return q_t, k_t, v_t


def attention_matrix(table: Table) -> torch.Tensor:
    """A ready attention matrix (heads, n, n): square, non-negative, rows summing to 1."""
    heads, rows, cols = table.values.shape
    if rows != cols:
        raise UploadError("model.upload_not_square", name=table.name,
                          shape=_shape(table.values.shape))
    if rows > MAX_MATRIX_TOKENS:  # 2048 x 2048 in float16 fits the upload size: 4M chart rows
        raise UploadError("errors.upload_matrix_tokens", name=table.name, n=rows,
                          limit=MAX_MATRIX_TOKENS)
    w = torch.from_numpy(table.values)                                   # (heads, n, n)
    if (w < 0).any():
        h, i, j = (int(x) for x in (w < 0).nonzero()[0])
        raise UploadError("model.upload_negative", head=h, row=i, column=j,
                          value=float(w[h, i, j]))
    sums = w.double().sum(dim=-1)                                        # (heads, n)
    bad = (sums - 1.0).abs() > ROW_SUM_TOLERANCE
    if bad.any():
        h, i = (int(x) for x in bad.nonzero()[0])
        raise UploadError("model.upload_row_sum", head=h, row=i, total=float(sums[h, i]),
                          count=int(bad.sum()))
    return w


def to_npy(values: torch.Tensor) -> bytes:
    """A tensor as the bytes of a .npy file (what the upload reads back)."""
    buf = io.BytesIO()
    np.save(buf, values.detach().cpu().numpy().astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def to_csv(values: torch.Tensor, tokens) -> bytes:
    """One head (n, d) as CSV with a header and a "token" column (what the upload reads back;
    like every CSV the dashboard writes, cells that a spreadsheet would run are defused)."""
    frame = pd.DataFrame(values.detach().cpu().numpy(),
                         columns=[f"d{i}" for i in range(values.shape[-1])])
    frame.insert(0, "token", list(tokens))
    return csv_bytes(frame)


def qkv_analysis(spec: AttentionSpec, q: tuple[str, bytes], k: tuple[str, bytes],
                 v: tuple[str, bytes] | None, typed_tokens: str = "") -> Analysis:
    """Analysis of uploaded (name, bytes) Q, K and optional V through core.attention, with
    the spec's mask and temperature; the tokens come from resolve_tokens."""
    tables = [read_file(*f) for f in (q, k) + ((v,) if v is not None else ())]
    q_t, k_t, v_t = qkv(tables[0], tables[1], tables[2] if v is not None else None)
    heads, n, d_k = q_t.shape
    tokens = resolve_tokens(n, typed_tokens, tables, spec.tokens)
    own = replace(spec, tokens=tokens, heads=heads, d_k=d_k, source="toy")
    own.validate()
    return analyze_qkv(own, tokens, q_t, k_t, v_t)


def matrix_upload(w: tuple[str, bytes], typed_tokens: str,
                  fallback: tuple[str, ...]) -> tuple[tuple[str, ...], torch.Tensor]:
    """Tokens and a validated attention matrix (heads, n, n) from an uploaded file."""
    table = read_file(*w)
    weights = attention_matrix(table)
    return resolve_tokens(weights.shape[-1], typed_tokens, [table], fallback), weights
