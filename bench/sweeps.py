"""The causal-LM sweeps (attention.sweeps): a per-layer sweep sharing the unmodified prefix
against recomputing every setting from the start, and the sweep's throughput against the
matmul rate measured in the same run (real pieces counted, padding not). CPU seconds.

    python -m bench.sweeps [--quick]

The model is the bundled SmolLM2 when it loads, else a small LLaMA built from a config."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.timing import row

TEXTS = ["Water boils at a lower temperature on a mountain because the air pressure is lower.",
         "Light from the Sun takes about eight minutes to reach the Earth.",
         "Is it true that no two snowflakes have exactly the same shape?",
         "The experiment was repeated three times before the results were published.",
         "A chemist who forgets to label her samples will soon regret it.",
         "The telescope revealed four moons around Jupiter."]


def _model(folder: Path):
    from attention import config
    from attention.models import load_model

    try:
        return load_model(config.BUNDLED_LM, trusted=True)
    except Exception:  # noqa: BLE001 - no bundled LM on this install: a small LLaMA instead
        from transformers import LlamaConfig, LlamaForCausalLM

        from tests.tiny_models import TOKENIZER_FILES
        from attention.models import bundled_path
        import shutil

        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=30522, hidden_size=256, intermediate_size=768,
                          num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=4,
                          max_position_embeddings=128, architectures=["LlamaForCausalLM"])
        LlamaForCausalLM(cfg).save_pretrained(folder)
        for name in TOKENIZER_FILES:
            if (Path(bundled_path()) / name).exists():
                shutil.copy(Path(bundled_path()) / name, folder / name)
        return load_model(str(folder), trusted=True)


def _flops(model) -> tuple[float, float]:
    """(multiply-adds x 2 per piece in one decoder layer's linear maps, in the LM head)."""
    from attention.sweeps.engine import layer_modules

    layer = sum(m.weight.numel() for m in layer_modules(model)[0].modules()
                if isinstance(m, torch.nn.Linear))
    head = model.model.get_output_embeddings().weight.numel()
    return 2.0 * layer, 2.0 * head


def _matmul_rate(tokens: int, hidden: int, repeats: int) -> float:
    a, b = torch.randn(tokens, hidden), torch.randn(hidden, 4 * hidden)   # (t, h), (h, 4h)
    a @ b
    start = time.process_time()
    for _ in range(repeats):
        a @ b
    return 2.0 * tokens * hidden * 4 * hidden * repeats / (time.process_time() - start)


def run(quick: bool = False) -> list[dict]:
    from attention.sweeps.engine import run_batch
    from attention.sweeps.settings import BASE, Setting

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        model = _model(Path(tmp))
        if quick:
            texts = TEXTS
        else:
            from attention.corpus import load
            texts = load("bundled:en")[:16]
        rows = sorted((model.encode(t)["input_ids"][0].tolist() for t in texts), key=len)
        step = 3 if quick else 1
        settings = [BASE] + [Setting("tau", "2", layer) for layer in range(0, model.layers, step)]
        timed = {}
        for share in (True, False) * (1 if quick else 2):
            start = time.process_time()
            res = run_batch(model, rows, settings, reference=14.0, share=share)
            timed.setdefault(share, []).append((time.process_time() - start, res))
        shared = min(t for t, _ in timed[True])
        full = min(t for t, _ in timed[False])
        per_layer, head = _flops(model)
        res = timed[True][0][1]
        pieces = int(res.rows.sum())
        work = res.layer_tokens * per_layer + pieces * len(settings) * head
        rate = _matmul_rate(pieces, model.hidden, 20 if quick else 100)
        achieved = work / shared
    return [
        row("sweeps: per-layer settings sharing the prefix", "every setting from the start",
            shared / full, 1 / 1.5,
            f"{model.name}, {len(settings) - 1} layers' tau 2 on {len(rows)} texts: "
            f"{full / shared:.2f}x faster"),
        row("sweeps: matmul rate / job throughput", "a matmul of the same pieces",
            rate / achieved, 4.0,
            f"{achieved / 1e9:.1f} of {rate / 1e9:.1f} GFLOP/s ({achieved / rate:.0%}), "
            f"{pieces} real pieces x {len(settings)} settings"),
    ]


if __name__ == "__main__":
    from bench.timing import print_table

    print_table(run(quick="--quick" in sys.argv))
