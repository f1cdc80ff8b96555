"""A tiny LLaMA GGUF file written with gguf's own writer (GGUFWriter), as llama.cpp names its
metadata and tensors (what transformers' GGUF reader expects): 2 layers, 4 heads, 2 k/v heads,
hidden size 32, a byte-level BPE vocabulary of 256 bytes, a few merges and an end token.
Weights are random (seeded); the feed-forward ones quantised to Q8_0, so the conversion
dequantises as it does for SmolLM2's 4-bit blocks."""
from __future__ import annotations

from pathlib import Path

import numpy as np

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 32, 2, 4, 2, 64, 64
MERGES = ("Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "Ġ s", "Ġs at", "Ġ o", "Ġo n")


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-in for each byte (the byte-level BPE alphabet)."""
    from attention.models.loaded import _BYTES

    chars = {b: c for c, b in _BYTES.items()}
    return [chars[b] for b in range(256)]


def vocabulary() -> list[str]:
    merged = ["".join(m.split(" ")) for m in MERGES]
    return [*_byte_chars(), *dict.fromkeys(merged), "<|endoftext|>"]


def write(path: Path, *, arch: str = "llama", seed: int = 0) -> Path:
    """The tiny GGUF at `path` (architecture `arch` in its metadata: another name makes a
    file transformers cannot read)."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens = vocabulary()
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny")
    w.add_block_count(LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 1) + [3])          # normal pieces, then a control token
    w.add_token_merges(list(MERGES))
    w.add_bos_token_id(vocab - 1)
    w.add_eos_token_id(vocab - 1)
    w.add_add_bos_token(False)

    def tensor(name, *shape, scale=0.3, quant=False):
        data = (rng.standard_normal(shape) * scale).astype(np.float32)   # (out, in) as numpy
        if quant:
            w.add_tensor(name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, data)

    d_head = HIDDEN // HEADS
    tensor("token_embd.weight", vocab, HIDDEN, scale=1.0)
    for i in range(LAYERS):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        tensor(b + "attn_q.weight", HEADS * d_head, HIDDEN)
        tensor(b + "attn_k.weight", KV_HEADS * d_head, HIDDEN)
        tensor(b + "attn_v.weight", KV_HEADS * d_head, HIDDEN)
        tensor(b + "attn_output.weight", HIDDEN, HEADS * d_head)
        w.add_tensor(b + "ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        tensor(b + "ffn_gate.weight", FFN, HIDDEN, quant=True)
        tensor(b + "ffn_up.weight", FFN, HIDDEN, quant=True)
        tensor(b + "ffn_down.weight", HIDDEN, FFN, quant=True)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
