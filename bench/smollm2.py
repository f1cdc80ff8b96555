"""SmolLM2-135M-Instruct, the bundled causal LM: its forward with core.attention inside against
eager transformers on the same weights, and the corpus job's throughput against the float32
matmul rate measured in the same run.

    forward     LoadedModel.run(text) / eager LlamaForCausalLM (the converted folder,
                attn_implementation="eager", output_attentions): target <= 1.2
    corpus job  compute_shard over bundled English sentences (length-sorted padded batches,
                what the job keeps: stats and q/k samples), real (unpadded) pieces only,
                against torch.mm's float32 rate on the shape of the model's feed-forward
                layers (1024 pieces x hidden @ hidden x intermediate: most of its FLOPs),
                measured before and after the job, the higher of the two. The
                FLOPs per piece: 2 per weight of every linear layer and the LM head, plus
                attention's two products (2 n d each per head and layer, n = the text's
                length). The row's ratio is the job's time over the time those FLOPs take
                at the matmul rate (<= 1/0.6: at least 0.6 of the rate); the detail gives
                the fraction itself.

Quick mode runs the tiny GGUF of the tests (tests/tiny_gguf.py, converted into a temporary
folder) for the forward row and a few sentences: it checks that the rows still run; the ratios
mean something only for SmolLM2 (`python -m bench smollm2`, which converts it once into the
cache when no copy is found: about half a minute).

    python -m bench.smollm2 [--quick]
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from attention import config, models     # offline: models.load_model registers it so
from attention.models import convert
from bench.timing import interleaved_medians, print_table, row

TEXT = ("The capital of France is Paris, a city on the Seine that has been the seat of the "
        "country's government for most of its history. Its museums, the Louvre among them, "
        "draw millions of visitors every year, and its cafes line the old boulevards.")
FORWARD_TARGET = 1.2
RATE_TARGET = 0.6          # of the matmul rate
TEXTS = 256                # bundled sentences the full corpus row runs


def _tiny_gguf(folder: Path) -> Path:
    from tests import tiny_gguf

    return tiny_gguf.write(folder / "tiny.gguf")


def _model(quick: bool, tmp: Path):
    """(LoadedModel, converted folder): SmolLM2, or in quick mode the tiny GGUF."""
    if quick:
        gguf = _tiny_gguf(tmp)
        folder = convert.convert(gguf, tmp / "converted")
        os.environ[config.ENV_PREBUILT] = str(tmp / "converted")
        return models.load_model(str(gguf), trusted=True), folder
    loaded = models.load_model(config.BUNDLED_LM)
    return loaded, convert.converted(convert.packaged_gguf())


def _forward_row(loaded, folder: Path, repeats: int) -> dict:
    from transformers import AutoModelForCausalLM

    eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    enc_text = TEXT if loaded.max_tokens > 200 else "the cat sat on the mat"

    def ref():
        enc = loaded.tokenizer(enc_text, return_tensors="pt")
        with torch.no_grad():
            return eager(**enc, output_attentions=True)

    run = loaded.run(enc_text)
    out = ref()
    assert (run.logits - out.logits[0]).abs().max().item() <= 1e-4, "parity first"
    med = interleaved_medians({"eager": ref, "core": lambda: loaded.run(enc_text)}, repeats)
    return row(f"{loaded.name}: forward with core.attention inside", "eager forward, same model",
               med["core"] / med["eager"], FORWARD_TARGET,
               f"{run.n} pieces, {loaded.layers}x{loaded.heads} heads (kv {loaded.kv_heads}); "
               f"eager {med['eager'] * 1000:.0f} ms, core {med['core'] * 1000:.0f} ms")


def linear_flops(model) -> int:
    """2 per weight of every linear layer (the LM head included) per piece."""
    return 2 * sum(m.weight.numel() for m in model.modules()
                   if isinstance(m, torch.nn.Linear))


def matmul_rate(hidden: int, inner: int, rows: int = 1024, seconds: float = 1.0) -> float:
    """float32 FLOP per CPU second of torch.mm on (rows, hidden) @ (hidden, inner)."""
    a, b = torch.randn(rows, hidden), torch.randn(hidden, inner)    # (rows, hidden), (hidden, inner)
    torch.mm(a, b)
    done, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        torch.mm(a, b)
        done += 1
    return done * 2 * rows * hidden * inner / (time.process_time() - start)


def _fits(loaded, text: str) -> bool:
    from attention.errors import UserError

    try:
        loaded.encode(text)
    except UserError:
        return False
    return True


def _corpus_row(loaded, texts: list[str]) -> dict:
    from attention.corpus.compute import Settings, capture, compute_shard

    texts = [t for t in texts if _fits(loaded, t)]        # the tiny model's 64 pieces
    groups, _ = capture(loaded, texts[:8])                # warm: first-call costs
    del groups
    lengths = [loaded.encode(t)["input_ids"].shape[1] for t in texts]
    real = sum(lengths)
    flops = linear_flops(loaded.model) * real + sum(
        loaded.layers * loaded.heads * 2 * (2 * n * n * loaded.d_head) for n in lengths)
    shape = (loaded.hidden, getattr(loaded.model.config, "intermediate_size", 4 * loaded.hidden))
    before = matmul_rate(*shape)
    start = time.process_time()
    tables = compute_shard(loaded, 0, texts, Settings(batch_size=len(texts)))
    took = time.process_time() - start
    rate = max(before, matmul_rate(*shape))          # the job between two; the higher one
    assert len(tables["texts"]) == len(texts)
    fraction = flops / took / rate
    per_piece = flops / real
    return row(f"{loaded.name}: corpus job (stats, q/k), {len(texts)} texts",
               "torch.mm float32 rate, same run", 1 / fraction, 1 / RATE_TARGET,
               f"{fraction:.2f} of {rate / 1e9:.0f} GFLOP/s; {real} real pieces, "
               f"{per_piece / 1e6:.0f} MFLOP per piece ({linear_flops(loaded.model) / 1e6:.0f} "
               f"linear + LM head, the rest attention); {real / took:.0f} pieces/s")


def run(quick: bool = False) -> list[dict]:
    from attention.text.corpora import load

    torch.set_num_threads(1)
    saved = os.environ.get(config.ENV_PREBUILT)
    with tempfile.TemporaryDirectory(prefix="bench_smollm2_") as tmp:
        try:
            loaded, folder = _model(quick, Path(tmp))
            texts = load("bundled:en")[: 16 if quick else TEXTS]
            rows = [_forward_row(loaded, folder, 3 if quick else 15), _corpus_row(loaded, texts)]
        finally:
            if saved is None:
                os.environ.pop(config.ENV_PREBUILT, None)
            else:
                os.environ[config.ENV_PREBUILT] = saved
            if quick:
                from attention.models import loading

                loading.clear_kept()
    return rows


if __name__ == "__main__":
    import sys

    print_table(run(quick="--quick" in sys.argv))
