"""The core registered inside a model against the same model's own eager attention.

Baseline: the checkpoint loaded the ordinary way (`attn_implementation="eager"`), the text
tokenised and one forward pass with `output_attentions=True` (eager computes the weights anyway). Against it,
`LoadedModel.run(text)`: one forward pass with core.attention inside every layer, q/k/v and
weights captured, the last hidden states pooled into the embedding. Two models: the bundled
all-MiniLM-L6-v2 and a random LLaMA with grouped k/v (4 layers, 8 heads, 2 kv heads,
hidden 256), saved to a temporary folder and loaded by path. Parity is checked first, so the
ratio compares equal work.

    python -m bench.models
    python -m bench.models --quick   # 3 repeats
"""
from __future__ import annotations

import inspect
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from attention import models  # noqa: E402
from attention.models import loading  # noqa: E402

from .timing import interleaved_medians, print_table, row  # noqa: E402

TEXT = ("the quick brown fox jumps over the lazy dog while a curious cat watches from the old "
        "stone wall , and somewhere down the river a boat drifts slowly past the mill . when "
        "evening comes the village lights glow softly , children run home across the fields")
TARGET = 1.2
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def tiny_llama(folder: Path) -> Path:
    """A seeded random LLaMA (grouped-query attention) with MiniLM's tokenizer in `folder`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=30522, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=512, architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    for name in TOKENIZER_FILES:
        src = Path(models.bundled_path()) / name
        if src.exists():
            shutil.copy(src, folder / name)
    return folder


def _reference(loaded: models.LoadedModel):
    """The same checkpoint through transformers with its eager attention: the bundled model
    runs on attention.models.bert's own BertModel, so its reference is transformers'
    BertModel; any other model's is its own class."""
    if loaded.source == models.BUNDLED:
        from transformers import BertModel

        return BertModel.from_pretrained(models.bundled_path(), attn_implementation="eager")
    return type(loaded.model).from_pretrained(loaded.source, attn_implementation="eager")


def _eager(loaded: models.LoadedModel):
    model = _reference(loaded).eval()
    accepted = inspect.signature(model.forward).parameters

    def forward():          # from text, as LoadedModel.run: tokenise, then one forward pass
        enc = loaded.tokenizer(TEXT, return_tensors="pt")
        enc = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask") or k in accepted}
        with torch.no_grad():
            return model(**enc, output_attentions=True)

    return forward


def _compare(label: str, loaded: models.LoadedModel, repeats: int = 15) -> dict:
    eager = _eager(loaded)
    run = loaded.run(TEXT)
    own = torch.stack(eager().attentions)[:, 0]
    assert (run.weights - own).abs().max().item() <= 1e-5, "parity first"
    med = interleaved_medians({"eager": eager, "core": lambda: loaded.run(TEXT)}, repeats)
    return row(f"{label}: forward with core.attention inside", "eager forward, same model",
               med["core"] / med["eager"], TARGET,
               f"{run.n} tokens, {loaded.layers}x{loaded.heads} heads "
               f"(kv {loaded.kv_heads}); eager {med['eager'] * 1000:.1f} ms, "
               f"core {med['core'] * 1000:.1f} ms")


def _load_folder(path: str) -> models.LoadedModel:
    """A folder as the operator's own code loads it (trusted: the page policy, which refuses
    folders on a shared server, does not apply to a benchmark)."""
    if "trusted" in inspect.signature(models.load_model).parameters:
        return models.load_model(path, trusted=True)
    return models.load_model(path)


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    repeats = 3 if quick else 15
    rows = [_compare("MiniLM", models.load_model(models.BUNDLED), repeats)]
    folder = Path(tempfile.mkdtemp(prefix="bench_models_"))
    try:
        rows.append(_compare("tiny LLaMA (GQA)", _load_folder(str(tiny_llama(folder))), repeats))
    finally:
        # the tiny model stays among the loaded models (a few MB) until others push it out
        clear = getattr(loading, "_load_cached", None)
        if clear is not None:
            clear.cache_clear()
        shutil.rmtree(folder, ignore_errors=True)
    return rows


if __name__ == "__main__":
    import sys

    print_table(run(quick="--quick" in sys.argv))
