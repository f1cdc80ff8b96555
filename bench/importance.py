"""Batched importance on MiniLM against one forward pass of the same text.

Baseline: `LoadedModel.run(text)` on a 32-piece text (one forward with the core inside,
weights captured). Against it: all 72 head ablations of that text
(`importance.heads.head_ablation`, one batch element per head, forwards of at most
BATCH_TOKENS pieces; target <= 20x) and the occlusion of each of its pieces
(`importance.tokens.occlude`: the 30 shortened texts, [CLS] and [SEP] are not removed).

Occlusion is held to its own floor, stated in its row: removal is exact (every shortened
text runs through every layer: in a bidirectional encoder no row of it equals a row of
another text after layer 0), so it cannot cost less than the matrix products of the k shortened texts
of n - 1 pieces. The floor is their multiply-adds against those of one forward of the n
pieces, from the model's shapes: per layer and text of L pieces, L * (4 h^2 + 2 h i) for the
q, k, v and output projections and the feed-forward (hidden h, intermediate size i) plus
2 L^2 h for the scores and weights @ v (heads * L^2 * d_head each, heads * d_head = h).
The row's ratio is (occlusion time / forward time) / floor; target <= 1.3. Before timing, a
few of occlusion's values are checked against transformers' own BertModel (eager) run on the
shortened ids: no approximation.

    python -m bench.importance
    python -m bench.importance --quick   # 2 repeats
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from attention import models  # noqa: E402
from attention.importance import heads as importance_heads  # noqa: E402
from attention.importance import tokens as importance_tokens  # noqa: E402

from .timing import interleaved_medians, print_table, row  # noqa: E402

TEXT = ("the quick brown fox jumps over the lazy dog while a curious cat watches from the old "
        "stone wall , and a small boat drifts slowly past the mill")
OCCLUSION_TARGET = 1.3      # x the floor


def layer_macs(length: int, hidden: int, intermediate: int) -> int:
    """Multiply-adds of one encoder layer on `length` pieces: q, k, v, output projections and
    the feed-forward, plus the scores and weights @ v of all heads together."""
    return length * (4 * hidden * hidden + 2 * hidden * intermediate) + 2 * length * length * hidden


def occlusion_floor(n: int, texts: int, layers: int, hidden: int, intermediate: int) -> float:
    """Multiply-adds of `texts` texts of n - 1 pieces over those of one text of n pieces."""
    return (texts * layers * layer_macs(n - 1, hidden, intermediate)
            / (layers * layer_macs(n, hidden, intermediate)))


def _intermediate(model: models.LoadedModel) -> int:
    config = getattr(model.model, "config", None)
    size = getattr(config, "intermediate_size", None)
    return int(size) if size else 4 * model.hidden


def measured(model: models.LoadedModel, text: str):
    """(ids, occlusion(), head_ablation()) through the package's own functions: `item` +
    `occlude` (the text's own run is the base: only the shortened texts run)."""
    it = importance_tokens.item(model, text)
    return (list(it.ids), lambda: importance_tokens.occlude(model, [it])[0],
            lambda: importance_heads.head_ablation(model, it))


def check_exact(ids: list[int], occluded: torch.Tensor) -> float:
    """Largest difference between occlusion's values and 1 - cos of the mean-pooled, unit
    sentence embeddings that transformers' BertModel (eager) gives the full and the shortened
    ids, at the first, middle and last piece occlusion measured."""
    from transformers import BertModel

    ref = BertModel.from_pretrained(models.bundled_path(), attn_implementation="eager").eval()

    def embedding(piece_ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            last = ref(input_ids=torch.tensor([piece_ids])).last_hidden_state[0]   # (n, hidden)
        e = last.mean(dim=0)
        return e / e.norm()

    full = embedding(ids)
    done = [j for j in range(len(ids)) if not torch.isnan(occluded[j])]
    worst = 0.0
    for j in (done[0], done[len(done) // 2], done[-1]):
        short = embedding(ids[:j] + ids[j + 1:])
        worst = max(worst, abs(float(1.0 - (full * short).sum()) - float(occluded[j])))
    return worst


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    model = models.load_model()
    ids, occlusion, ablation = measured(model, TEXT)
    n = len(ids)
    assert n == 32, n
    occluded = occlusion()
    texts = int((~torch.isnan(occluded)).sum())        # the pieces removed (not [CLS], [SEP])
    worst = check_exact(ids, occluded)
    assert worst < 1e-4, f"occlusion differs from removing the piece by {worst:.2e}"
    times = interleaved_medians({
        "forward": lambda: model.run(TEXT),
        "ablation": ablation,
        "occlusion": occlusion,
    }, repeats=2 if quick else 5)
    base = times["forward"]
    inter = _intermediate(model)
    floor = occlusion_floor(n, texts, model.layers, model.hidden, inter)
    over = times["occlusion"] / base
    return [
        row("MiniLM: 72 head ablations, 32 pieces", "one forward", times["ablation"] / base, 20.0,
            f"{times['ablation'] * 1000:.0f} ms vs {base * 1000:.0f} ms"),
        row(f"MiniLM: occlusion of {texts} of 32 pieces", f"its floor: {floor:.1f} forwards' matmuls",
            over / floor, OCCLUSION_TARGET,
            f"{over:.1f} forwards ({times['occlusion'] * 1000:.0f} ms vs {base * 1000:.0f} ms); "
            f"floor = multiply-adds of {texts} texts of {n - 1} pieces / one of {n} "
            f"({model.layers} layers, hidden {model.hidden}, intermediate {inter}, "
            f"{model.heads} heads); exact to {worst:.0e}"),
    ]


if __name__ == "__main__":
    print_table(run(quick="--quick" in sys.argv))
