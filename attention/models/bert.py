"""The bundled all-MiniLM-L6-v2 without transformers: BERT in plain torch, core inside.

transformers takes about 2 s to import on a small server (its lazy import table, then
modeling_utils, which pulls in torch._dynamo and scipy.optimize); this module loads the whole
model in about 0.1 s. The bundled model is one known architecture, so it runs here: the
encoder of Devlin et al. (2019), with transformers' module names, so that

- the checkpoint's safetensors keys load as they are (`encoder.layer.0.attention.self.query`);
- every attention layer calls `models.core_attention_forward`, the function registered with
  transformers for any other model: captures and interventions work alike on both;
- the hooks the pages use find what they find on transformers' BertModel: `base_model`,
  `get_input_embeddings()`, the attention module's (output, weights), and the output
  projection `attention.output.dense` beside it.

Sums are taken in transformers' order, so the floats are the same bit for bit (measured:
max |difference| 0.0 in weights and hidden states). tests/test_bert.py holds it to
transformers' own eager BertModel on the same checkpoint and on a random one (hidden states,
attention weights, gradients, parameters) and its tokenizer to AutoTokenizer's. Only
config.json, model.safetensors, tokenizer.json and tokenizer_config.json are read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from attention.models.registered import core_attention_forward


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT config.json this encoder reads."""
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"

    @classmethod
    def from_json(cls, path: Path) -> "BertConfig":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        config = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        if config.hidden_act != "gelu" or config.position_embedding_type != "absolute":
            raise ValueError(f"{path}: not a plain BERT (hidden_act={config.hidden_act!r}, "
                             f"position_embedding_type={config.position_embedding_type!r})")
        return config


@dataclass(frozen=True)
class EncoderOutput:
    last_hidden_state: torch.Tensor      # (b, n, hidden)
    pooler_output: torch.Tensor          # (b, hidden) tanh(dense(first token's state))


# Layers whose weights are left as allocated: the checkpoint overwrites every one, and the
# random init took 0.25 s of MiniLM's load (0.2 s the 30522 x 384 word table). Building on
# the meta device would skip it too, but imports torch._dynamo (0.7 s).
class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class _Table(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class Embeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = _Table(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = _Table(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = _Table(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[1]
        positions = torch.arange(n, device=input_ids.device)                     # (n,)
        x = self.word_embeddings(input_ids)                                       # (b, n, hidden)
        x = x + self.token_type_embeddings(token_type_ids)   # in transformers' order: the same
        x = x + self.position_embeddings(positions)          # floats, bit for bit
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    """The q, k, v projections; the attention itself is core.attention (through the same
    function transformers calls for a loaded model)."""
    is_causal = False

    def __init__(self, c: BertConfig):
        super().__init__()
        self.heads = c.num_attention_heads
        self.d_head = c.hidden_size // c.num_attention_heads
        self.query = _Linear(c.hidden_size, c.hidden_size)
        self.key = _Linear(c.hidden_size, c.hidden_size)
        self.value = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor,
                mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(output (b, n, hidden), weights (b, h, n, n)), as transformers' BertSelfAttention
        returns them (forward hooks on this module read the weights)."""
        b, n, _ = x.shape                                                         # (b, n, hidden)
        split = lambda t: t.view(b, n, self.heads, self.d_head).transpose(1, 2)   # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))  # (b, h, n, d)
        out, weights = core_attention_forward(self, q, k, v, mask, scaling=self.d_head ** -0.5)
        return out.reshape(b, n, self.heads * self.d_head), weights


class AddNorm(nn.Module):
    """LayerNorm(residual + dense(x)): BERT's "output" blocks."""

    def __init__(self, width: int, c: BertConfig):
        super().__init__()
        self.dense = _Linear(width, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = AddNorm(c.hidden_size, c)     # output.dense is W_O

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.output(self.self(x, mask)[0], x)


class Intermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = _Linear(c.hidden_size, c.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))                                   # exact (erf)


class Layer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = AddNorm(c.intermediate_size, c)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        a = self.attention(x, mask)                                               # (b, n, hidden)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c.num_hidden_layers))


class Pooler(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))                                    # (b, hidden)


class BertModel(nn.Module):
    """BERT's encoder, parameter for parameter transformers' BertModel. forward takes what a
    tokenizer gives and returns `.last_hidden_state` (b, n, hidden) and `.pooler_output`."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.config = c
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)
        self.pooler = Pooler(c)

    @property
    def base_model(self) -> "BertModel":
        return self

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> EncoderOutput:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)                          # (b, n)
        # (b, 1, 1, n) True = may attend: padded keys are hidden from every query
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        x = self.embeddings(input_ids, token_type_ids)                            # (b, n, hidden)
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return EncoderOutput(last_hidden_state=x, pooler_output=self.pooler(x))


def load_bert(folder: str | Path) -> BertModel:
    """The checkpoint in `folder` (config.json, model.safetensors), eval mode, float32."""
    from safetensors.torch import load_file

    folder = Path(folder)
    model = BertModel(BertConfig.from_json(folder / "config.json"))
    state = load_file(folder / "model.safetensors")
    state = {k: v.float() for k, v in state.items() if k != "embeddings.position_ids"}
    model.load_state_dict(state, strict=True)
    return model.eval()


class Tokenizer:
    """tokenizer.json through the tokenizers library, with the part of transformers' tokenizer
    interface the pages use (BERT's special tokens; no padding, no truncation)."""
    model_input_names = ("input_ids", "token_type_ids", "attention_mask")
    bos_token = eos_token = None

    def __init__(self, folder: str | Path):
        from tokenizers import Tokenizer as Fast

        folder = Path(folder)
        self._fast = Fast.from_file(str(folder / "tokenizer.json"))
        self._fast.no_padding()
        self._fast.no_truncation()
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.model_max_length = int(config.get("model_max_length", 512))
        for role in ("unk", "sep", "pad", "cls", "mask"):
            token = config.get(f"{role}_token", f"[{role.upper()}]")
            setattr(self, f"{role}_token", token)
            setattr(self, f"{role}_token_id", self._fast.token_to_id(token))
        self.all_special_tokens = tuple(getattr(self, f"{r}_token")
                                        for r in ("unk", "sep", "pad", "cls", "mask"))
        self.all_special_ids = [self._fast.token_to_id(t) for t in self.all_special_tokens]

    def __len__(self) -> int:
        return self._fast.get_vocab_size(with_added_tokens=True)

    def __call__(self, text: str, return_tensors: str | None = None, truncation: bool = False,
                 verbose: bool = True) -> dict:
        """input_ids, token_type_ids, attention_mask of [CLS] ... [SEP]: lists of n ints, or
        with return_tensors="pt" (1, n) int64 tensors."""
        if return_tensors not in (None, "pt") or truncation:
            raise ValueError("only return_tensors=None or 'pt', without truncation")
        enc = self._fast.encode(text)
        out = {"input_ids": enc.ids, "token_type_ids": enc.type_ids,
               "attention_mask": enc.attention_mask}
        if return_tensors is None:
            return out
        return {k: torch.tensor([v], dtype=torch.long) for k, v in out.items()}

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self._fast.id_to_token(ids)
        return [self._fast.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._token_id(tokens)
        return [self._token_id(t) for t in tokens]

    def _token_id(self, token: str) -> int:
        found = self._fast.token_to_id(token)
        return self.unk_token_id if found is None else found
