"""Block pooling and zoom windows for attention matrices too large to draw cell by cell.

A chart of n x n rects costs seconds in a browser once n passes ~100 (docs/decisions.md, "Long inputs"), so long
inputs are drawn as an overview of at most B x B blocks plus a full-resolution window.

Pooling an axis of n positions into at most B blocks uses blocks of `size = ceil(n / B)`
positions, starting at 0; the LAST block holds whatever is left (n - (blocks - 1) * size
positions, between 1 and size), so an uneven edge is never padded into a block's statistic:
a block's max or mean is taken over the cells that really are in it. Cells a mask forbids
(the causal upper triangle) are left out the same way; a block with no allowed cell has no
value (NaN in the pooled tensor, and no row in `attention.analysis.pooled.pooled_cells`).

How a block is summarised:
  "max"     the largest value in the block (for weights: the strongest link it contains);
  "mean"    the average over the block's cells (for weights: its share of attention);
  "extreme" the value with the largest magnitude, sign kept (for signed differences, whose
            plain max would hide every negative change).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

HOWS = ("max", "mean")  # what the user picks; differences use "extreme" when "max" is picked


@dataclass(frozen=True)
class Blocks:
    """How one axis of `n` positions is cut into blocks of `size` (the last may be shorter)."""
    n: int
    size: int

    @property
    def count(self) -> int:
        return math.ceil(self.n / self.size)

    def start(self, i: int) -> int:
        return i * self.size

    def stop(self, i: int) -> int:
        """One past the last position of block i (exclusive)."""
        return min(self.n, (i + 1) * self.size)

    def label(self, i: int) -> str:
        """Block i's positions, inclusive: "12-23", or "12" for a one-position block."""
        first, last = self.start(i), self.stop(i) - 1
        return str(first) if first == last else f"{first}-{last}"

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(self.count)]


def blocks_for(n: int, max_blocks: int) -> Blocks:
    """The smallest block size that cuts n positions into at most max_blocks blocks."""
    if n < 1 or max_blocks < 1:
        raise ValueError(f"need n >= 1 and max_blocks >= 1, got {n}, {max_blocks}")
    return Blocks(n=n, size=math.ceil(n / max_blocks))


def pool(matrix: torch.Tensor, max_blocks: int, how: str = "max",
         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, Blocks]:
    """Pool the last two dims of a square (..., n, n) matrix to (..., b, b), b <= max_blocks.

    how: "max" or "mean" of a block's counted cells; "extreme", the value of largest magnitude
    (for differences); "share", the sum over a block's keys averaged over its queries (of a
    row-stochastic matrix: the share of the queries' attention landing on the key block).

    mask: bool (n, n), True = the cell counts. Returns the pooled values (NaN for a block with
    no counted cell) and the Blocks that describe both axes.
    """
    if how not in ("max", "mean", "extreme", "share"):
        raise ValueError(f"how must be max, mean, extreme or share, got {how!r}")
    n = matrix.shape[-1]
    if matrix.shape[-2] != n:
        raise ValueError(f"expected a square matrix, got shape {tuple(matrix.shape)}")
    blocks = blocks_for(n, max_blocks)
    b, s = blocks.count, blocks.size
    pad = b * s - n                                                     # positions past the uneven edge
    values = matrix.to(torch.float32)                                   # (..., n, n)
    if pad:
        values = torch.nn.functional.pad(values, (0, pad, 0, pad))      # (..., b*s, b*s)
    tiles = values.reshape(*matrix.shape[:-2], b, s, b, s)              # (..., b, s, b, s)
    if mask is None and pad == 0:                                       # every cell counts
        ok, counts = None, torch.full((b, b), s * s)
    else:
        ok = _counted(n, blocks, mask)                                  # (b, s, b, s)
        counts = _over_blocks(ok.to(torch.float32), torch.sum)          # (b, b) cells per block
    if how in ("mean", "share"):
        kept = tiles if ok is None else torch.where(ok, tiles, 0.0)
        total = _over_blocks(kept, torch.sum)                           # (..., b, b)
        if how == "mean":
            pooled = total / counts.clamp_min(1)
        else:                                                           # mean over the block's queries
            rows = torch.tensor([blocks.stop(i) - blocks.start(i) for i in range(b)],
                                dtype=torch.float32)                    # (b,)
            pooled = total / rows.unsqueeze(-1)
    else:
        pooled = _over_blocks(tiles if ok is None else torch.where(ok, tiles, -math.inf), torch.amax)
        if how == "extreme":
            low = _over_blocks(tiles if ok is None else torch.where(ok, tiles, math.inf), torch.amin)
            pooled = torch.where(low.abs() > pooled.abs(), low, pooled)
    pooled = torch.where(counts > 0, pooled, math.nan)                  # (..., b, b)
    return pooled, blocks


def _over_blocks(tiles: torch.Tensor, op) -> torch.Tensor:
    """Reduce (..., b, s, b, s) over both s dims -> (..., b, b), one dim at a time (faster
    than a two-dim reduction over strided memory)."""
    return op(op(tiles, dim=-1), dim=-2)


def _counted(n: int, blocks: Blocks, mask: torch.Tensor | None) -> torch.Tensor:
    """(b, s, b, s) bool: which padded cells are real and allowed by the mask."""
    b, s = blocks.count, blocks.size
    counted = torch.ones(n, n, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    counted = torch.nn.functional.pad(counted, (0, b * s - n, 0, b * s - n), value=False)
    return counted.reshape(b, s, b, s)


def block_counts(n: int, blocks: Blocks, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(b, b) long: how many real, allowed cells each block holds."""
    return _over_blocks(_counted(n, blocks, mask).to(torch.float32), torch.sum).round().long()


def window(n: int, start: int, size: int) -> range:
    """Positions [start, start + size) clamped to fit inside 0..n-1 (size shrinks to n)."""
    size = max(1, min(int(size), n))
    start = max(0, min(int(start), n - size))
    return range(start, start + size)


def window_from_brush(n: int, queries: Sequence[float], keys: Sequence[float],
                      sizes: Sequence[int]) -> tuple[int, range, range]:
    """The zoom window for a box dragged on an overview: (size, query window, key window).

    queries / keys: the box's two edges in positions, either order. The size is the smallest of
    `sizes` that holds the box's longer side (the largest if none does); the window is centred
    on the box and clamped inside 0..n-1."""
    (q0, q1), (k0, k1) = sorted(map(float, queries)), sorted(map(float, keys))
    extent = max(q1 - q0, k1 - k0)
    size = min(next((s for s in sorted(sizes) if s >= extent), max(sizes)), n)
    centre = lambda lo, hi: round((lo + hi) / 2 - size / 2)   # noqa: E731
    return size, window(n, centre(q0, q1), size), window(n, centre(k0, k1), size)


def window_slice(matrix: torch.Tensor, queries: range, keys: range) -> torch.Tensor:
    """The (..., len(queries), len(keys)) part of a (..., n, n) matrix, cells unchanged."""
    return matrix[..., queries.start:queries.stop, keys.start:keys.stop]


def window_tokens(tokens: Sequence[str], positions: range) -> list[str]:
    """The tokens at the window's positions, in order (the zoom's axis labels)."""
    return list(tokens[positions.start:positions.stop])


def block_preview(tokens: Sequence[str], blocks: Blocks, i: int, width: int = 12) -> str:
    """A block's first and last token ("the … cat"), for tooltips on a pooled axis."""
    first, last = tokens[blocks.start(i)], tokens[blocks.stop(i) - 1]
    first, last = _clip(first, width), _clip(last, width)
    return first if blocks.stop(i) - blocks.start(i) == 1 else f"{first} … {last}"


def _clip(token: str, width: int) -> str:
    return token if len(token) <= width else token[: width - 1] + "…"
