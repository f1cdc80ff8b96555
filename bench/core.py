"""core.attention against torch's scaled_dot_product_attention on the same inputs.

12 heads, d_k = 64, n = 128, 512, 2048, one CPU thread. The core also returns the scores and
the weights (SDPA returns only the output), so it may cost a little more: target 1.5x.

    python -m bench.core [--quick]
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from attention.core import attention

from .timing import interleaved_medians, print_table, row

HEADS, D_K = 12, 64
SIZES = {128: 40, 512: 12, 2048: 5}  # n -> repeats
QUICK_SIZES = {128: 5, 256: 3, 512: 3}     # three sizes, as the full run has
TARGET = 1.5


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    for n, repeats in (QUICK_SIZES if quick else SIZES).items():
        gen = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(HEADS, n, D_K, generator=gen) for _ in range(3))  # (heads, n, d_k)
        ours = attention(q, k, v).output
        assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v), atol=1e-5)
        med = interleaved_medians({
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "core": lambda: attention(q, k, v),
        }, repeats)
        rows.append(row(f"core.attention n={n}", "scaled_dot_product_attention",
                        med["core"] / med["sdpa"], TARGET,
                        f"{HEADS} heads, d_k {D_K}, median of {repeats}"))
    return rows


if __name__ == "__main__":
    import sys

    print_table(run(quick="--quick" in sys.argv))
