"""Tiny random transformers checkpoints built offline from configs (MiniLM's tokenizer),
shared by the tests of attention.models and attention.importance."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from attention import config
from attention import models as M

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
VOCAB = 30522        # MiniLM's word pieces: every tiny model reads them with its tokenizer
TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64)


def _configs():
    from transformers import BertConfig, GPT2Config, LlamaConfig, Qwen2Config

    return {
        "bert": BertConfig(**TINY, architectures=["BertForMaskedLM"]),
        "bert_base": BertConfig(**TINY, architectures=["BertModel"]),
        "gpt2": GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                           architectures=["GPT2LMHeadModel"]),
        "llama": LlamaConfig(**TINY, num_key_value_heads=2, architectures=["LlamaForCausalLM"]),
        "qwen2": Qwen2Config(**TINY, num_key_value_heads=1, architectures=["Qwen2ForCausalLM"]),
    }


def _save(config, folder: Path) -> Path:
    """A random model of `config` (seeded) and MiniLM's tokenizer, as safetensors in `folder`."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    torch.manual_seed(0)
    arch = config.architectures[0]
    cls = (AutoModelForCausalLM if arch.endswith(("CausalLM", "LMHeadModel"))
           else AutoModelForMaskedLM if arch.endswith("MaskedLM") else AutoModel)
    model = cls.from_config(config, attn_implementation="eager")
    with torch.no_grad():                      # sharper random heads than the default init
        for p in model.parameters():
            p.mul_(3.0) if p.ndim == 2 else None
    model.save_pretrained(folder, safe_serialization=True)
    for name in TOKENIZER_FILES:
        src = Path(M.bundled_path()) / name
        if src.exists():
            shutil.copy(src, folder / name)
    return folder


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """name -> folder of a tiny saved checkpoint, built once per session."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {name: _save(cfg, root / name) for name, cfg in _configs().items()}


@pytest.fixture
def local_models(monkeypatch):
    """A person's own machine: model folders load (a shared server refuses them)."""
    monkeypatch.setenv(config.ENV_LOCAL, "1")


def _output_projection(model, layer: int):
    """Independent of models.py: where each test architecture applies W_O."""
    base = model.base_model
    if hasattr(base, "encoder"):                                   # BERT
        return base.encoder.layer[layer].attention.output.dense
    if hasattr(base, "h"):                                         # GPT-2
        return base.h[layer].attn.c_proj
    return base.layers[layer].self_attn.o_proj                     # LLaMA, Qwen2


configs, save = _configs, _save     # public names for tests that build only some checkpoints


def build(root: Path, names=None) -> dict[str, Path]:
    """name -> folder of each tiny checkpoint (all of `configs()`, or those named)."""
    cfgs = _configs()
    return {name: _save(cfgs[name], root / name) for name in (names or cfgs)}
