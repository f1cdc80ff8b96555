"""Batched importance on MiniLM against one forward pass of the same text.

Baseline: `LoadedModel.run(text)` on a 32-piece text (one forward with the core inside,
weights captured). Against it: all 72 head ablations of that text (`importance.head_ablation`,
one batch element per head, forwards of at most BATCH_TOKENS pieces; target <= 20x) and the
occlusion of each of its 32 pieces (`importance.occlusion`, the 32 shortened texts in one
batch; target <= 10x).

Occlusion's floor: with exact semantics every shortened text runs through every layer (in a
bidirectional encoder no row of it equals a row of another text after layer 0), so its
matrix products are 32 x 31 = 992 pieces' worth, 31 times those of the 32-piece forward.
Profiled (torch.profiler, one thread): about 80% of occlusion's time is aten::addmm running
at the CPU's matmul peak, while the 32-piece forward is only about half matmul (the rest is
per-layer work that batching amortises). So the ratio cannot go much below ~14x on such a
CPU; the 10x target assumed a forward dominated by per-call overhead.

    python -m bench.importance
"""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from attention import importance, models  # noqa: E402

from .timing import interleaved_medians, print_table, row  # noqa: E402

TEXT = ("the quick brown fox jumps over the lazy dog while a curious cat watches from the old "
        "stone wall , and a small boat drifts slowly past the mill")


def run() -> list[dict]:
    model = models.load_model()
    ids = importance.ids_of(model, TEXT)
    assert len(ids) == 32, len(ids)
    times = interleaved_medians({
        "forward": lambda: model.run(TEXT),
        "ablation": lambda: importance.head_ablation(model, ids),
        "occlusion": lambda: importance.occlusion(model, ids),
    }, repeats=5)
    base = times["forward"]
    return [
        row("MiniLM: 72 head ablations, 32 pieces", "one forward", times["ablation"] / base, 20.0,
            f"{times['ablation'] * 1000:.0f} ms vs {base * 1000:.0f} ms"),
        row("MiniLM: occlusion of 32 pieces", "one forward", times["occlusion"] / base, 10.0,
            f"{times['occlusion'] * 1000:.0f} ms vs {base * 1000:.0f} ms"),
    ]


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    print_table(run())
