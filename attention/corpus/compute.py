"""The per-batch computation of the corpus job: one function both engines call.

    compute_shard(model, first_id, texts, settings) -> dict[table name, DataFrame]

A shard's texts go through the model in padded batches (right-padded with id 0 and an
attention mask, so every real piece keeps its position and a text gives what it gives alone,
to float error; tests/test_corpus_job.py checks 1e-5 against `batched=False`, one
`LoadedModel.run` per text). Tables, one row per:

    texts       text: text_id, text, pieces, error ("" or why the text was skipped)
    pieces      piece of every text: text_id, position, token, special
    stats       (text, layer, head): Clark et al.'s HEAD_COLUMNS and the SINK_COLUMNS
    qk          (text, layer, head, sampled piece): position, token, q, k (lists of d_head)
    importance, faithfulness, heads   the importance page's per-text rows
                (attention.importance.product: token importance of each piece, each text's
                comprehensiveness per method and fraction, head importance of each of the
                first texts), with text_id
    nll         (text, setting): a causal LM's NLL and sharpness (attention.sweeps.table)

`importance` and `nll` read corpus-level inputs computed once before any shard (the job's
prepass, by product), so a table computed in shards equals the table computed whole.

The sampled pieces (`settings.sample` per text, the same for every head) are drawn by a
generator seeded with (SEED, text_id): a text's sample does not depend on its batch or engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attention import config
from attention.errors import UserError
from attention.measures.heads import padded_table
from attention.models.capture import forward
from attention.models.registered import Forward
from attention.models.runs import special_names

SEED = 0
WHAT = ("stats", "importance", "qk", "nll")
CAPTURED = ("stats", "qk")    # products read from a forward that keeps every weight
DEFAULT_WHAT = ("stats", "qk")
DEFAULT_SAMPLE = 8
# The code that makes the captured products' rows (texts, pieces, stats, qk): their job's key
# (shards.code_version). nll and importance are keyed by their own stores' code_key.
SOURCES = ("corpus/compute.py", "core.py", "config.py", "measures", "models")
TABLES = ("texts", "pieces", "stats", "qk", "importance", "faithfulness", "heads", "nll")


@dataclass(frozen=True)
class Settings:
    what: tuple[str, ...] = DEFAULT_WHAT
    batch_size: int = 32          # texts per shard (and at most per forward)
    sample: int = DEFAULT_SAMPLE  # pieces per text whose q and k are kept
    sweeps: tuple[str, ...] = ("global",)   # nll: attention.sweeps.settings.SWEEPS
    limit: int = 0                # the corpus's first `limit` texts only (0: every text)

    def as_dict(self) -> dict:
        out = {"what": list(self.what), "batch_size": self.batch_size, "sample": self.sample}
        if "nll" in self.what:
            out.update(sweeps=list(self.sweeps), limit=self.limit)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Settings":
        return cls(what=tuple(d["what"]), batch_size=d["batch_size"], sample=d["sample"],
                   sweeps=tuple(d.get("sweeps", ("global",))), limit=d.get("limit", 0))


@dataclass(frozen=True)
class Group:
    """One forward of b texts, right-padded to n pieces (b = 1 and no padding when a text runs
    alone). Padding keys weigh 0; padding query rows are never read."""
    index: list[int]              # the texts' positions in the shard
    ids: list[list[int]]          # each text's own pieces
    tokens: list[list[str]]
    weights: torch.Tensor         # (b, layers, heads, n, n)
    q: torch.Tensor               # (b, layers, heads, n, d_head)
    k: torch.Tensor               # (b, layers, heads, n, d_head)


def sample_positions(text_id: int, n: int, sample: int) -> np.ndarray:
    """Sorted positions of up to `sample` pieces of a text of n pieces, fixed by its id."""
    rng = np.random.default_rng([SEED, int(text_id)])
    return np.sort(rng.choice(n, size=min(sample, n), replace=False))


def _encode(model, text: str) -> tuple[dict | None, str]:
    try:
        return model.encode(text), ""
    except UserError as err:
        return None, str(err)


def _forward_group(model, index: list[int], encs: list[dict]) -> Group:
    """One padded forward of a few encoded texts."""
    lengths = [e["input_ids"].shape[1] for e in encs]
    n = max(lengths)
    batch = {}
    for key in encs[0]:
        if not isinstance(encs[0][key], torch.Tensor):
            continue
        full = torch.zeros(len(encs), n, dtype=encs[0][key].dtype)       # (b, n), pad id 0
        for i, e in enumerate(encs):
            full[i, :lengths[i]] = e[key][0]
        batch[key] = full
    if "attention_mask" not in batch:
        batch["attention_mask"] = torch.zeros(len(encs), n, dtype=torch.long)
        for i, m in enumerate(lengths):
            batch["attention_mask"][i, :m] = 1
    state = Forward(batch=True)
    forward(model.model, batch, state)
    ids = [batch["input_ids"][i, :m].tolist() for i, m in enumerate(lengths)]
    return Group(index=index, ids=ids,
                 tokens=[list(model.pieces(i)) for i in ids],
                 weights=torch.stack(state.weights, dim=1),               # (b, layers, heads, n, n)
                 q=torch.stack(state.q, dim=1), k=torch.stack(state.k, dim=1))


def _alone(model, i: int, text: str) -> Group:
    """One text through LoadedModel.run, the reference a batch must equal."""
    r = model.run(text)
    return Group(index=[i], ids=[list(r.ids)], tokens=[list(r.tokens)], weights=r.weights[None],
                 q=r.q[None], k=r.k[None])


PADDING = 1.05     # see _groups
LEAST = 8


def _groups(order: list[int], lengths: list[int], model, limit: int) -> list[list[int]]:
    """Texts (indices, by length) in groups of at most `limit` whose padded weights stay
    within MAX_WEIGHT_CELLS and, once a group holds LEAST texts, whose padding stays within
    PADDING x its real pieces. Measured (CPU time, one thread): MiniLM on 64 texts of 5-25
    words 20% faster than one group at 1.25, the same at 1.05; SmolLM2 on 256 bundled
    sentences 21.9 s at 1.25 (3,855 pieces computed for 3,426 real), 18.2 s at 1.05: a
    padding piece of a 135 M model costs more than one more forward's fixed overhead."""
    groups, current, pieces = [], [], 0
    for i in order:
        n = lengths[i]                  # sorted ascending: the last one is the longest
        count = len(current) + 1
        if current and (count > limit
                        or count * model.layers * model.heads * n * n > config.MAX_WEIGHT_CELLS
                        or (count > LEAST and count * n > PADDING * (pieces + n))):
            groups.append(current)
            current, pieces = [], 0
        current.append(i)
        pieces += n
    if current:
        groups.append(current)
    return groups


def capture(model, texts: list[str], *, batched: bool = True,
            limit: int = 64) -> tuple[list[Group], list[str]]:
    """Every text's forward, in groups (of one text each when not batched), and per text the
    sentence why it was skipped ("" when it ran)."""
    encoded = [_encode(model, t) for t in texts]
    errors = [err for _, err in encoded]
    ok = [i for i, (e, _) in enumerate(encoded) if e is not None]
    if not batched:
        return [_alone(model, i, texts[i]) for i in ok], errors
    lengths = {i: encoded[i][0]["input_ids"].shape[1] for i in ok}
    order = sorted(ok, key=lambda i: lengths[i])
    groups = _groups(order, [lengths.get(i, 0) for i in range(len(texts))], model, limit)
    return [_forward_group(model, g, [encoded[i][0] for i in g]) for g in groups], errors


def _importance(model, texts: list[str], ids: list[int], errors: list[str], index: list[int],
                pre: dict) -> dict[str, pd.DataFrame]:
    """The importance page's rows of the texts the page can measure (a text it refuses gets
    the sentence why in `errors`)."""
    from attention.importance.product import text_tables
    from attention.importance.tokens import check_texts

    ok = []
    for j, text in enumerate(texts):
        try:
            check_texts(model, [text])
        except UserError as err:
            errors[index[j]] = err.message("en")
            continue
        ok.append(j)
    if not ok:
        return {}
    return text_tables(model, [ids[j] for j in ok], [texts[j] for j in ok], pre)


def _pieces(group: Group, text_ids: list[int], special: set[int]) -> pd.DataFrame:
    lengths = [len(i) for i in group.ids]
    return pd.DataFrame({
        "text_id": np.repeat(text_ids, lengths),
        "position": np.concatenate([np.arange(m, dtype=np.int32) for m in lengths]),
        "token": [t for tokens in group.tokens for t in tokens],
        "special": [i in special for ids in group.ids for i in ids]})


def _stats(group: Group, text_ids: list[int], special: set[int], cls, sep) -> pd.DataFrame:
    table = padded_table(group.weights, group.tokens,
                         [[i in special for i in ids] for ids in group.ids], cls, sep)
    table.insert(0, "text_id", np.asarray(text_ids)[table.pop("text").to_numpy()])
    return table


def _qk(group: Group, text_ids: list[int], sample: int) -> pd.DataFrame:
    """The q and k of each text's sampled pieces, one row per (text, layer, head, piece)."""
    layers, heads, d = group.q.shape[1], group.q.shape[2], group.q.shape[-1]
    frames = []
    for b, (text_id, tokens) in enumerate(zip(text_ids, group.tokens)):
        pos = sample_positions(text_id, len(tokens), sample)              # (s,)
        q = group.q[b][:, :, pos].numpy().astype(np.float32)              # (layers, heads, s, d)
        k = group.k[b][:, :, pos].numpy().astype(np.float32)
        ll, hh, pp = np.meshgrid(np.arange(layers), np.arange(heads), np.arange(len(pos)),
                                 indexing="ij")
        frames.append({"text_id": np.full(ll.size, text_id), "layer": ll.ravel(),
                       "head": hh.ravel(), "position": pos[pp.ravel()],
                       "token": [tokens[p] for p in pos[pp.ravel()]],
                       "q": list(q.reshape(-1, d)), "k": list(k.reshape(-1, d))})
    out = pd.DataFrame({c: [v for f in frames for v in f[c]] if c in ("token", "q", "k")
                        else np.concatenate([f[c] for f in frames]) for c in frames[0]})
    return out.astype({"layer": np.int16, "head": np.int16, "position": np.int32})


def _encoded(model, texts: list[str]) -> tuple[list[Group], list[str]]:
    """Each text's pieces without a forward (groups of one, no weights): what `nll` needs."""
    groups, errors = [], []
    for i, text in enumerate(texts):
        enc, err = _encode(model, text)
        errors.append(err)
        if enc is not None:
            ids = enc["input_ids"][0].tolist()
            groups.append(Group(index=[i], ids=[ids], weights=None, q=None, k=None,
                                tokens=[list(model.pieces(ids))]))
    return groups, errors


def _nll(model, first_id: int, groups: list[Group], errors: list[str], settings: Settings,
         prepass: dict) -> pd.DataFrame:
    from attention.sweeps.table import nll_table

    ids, rows = [], []
    for group in groups:
        for i, piece_ids in zip(group.index, group.ids):
            if len(piece_ids) < 2:
                errors[i] = UserError("model.too_short").message("en")
            else:
                ids.append(first_id + i)
                rows.append(piece_ids)
    return nll_table(model, ids, rows, settings.sweeps, prepass, limit=settings.batch_size)


def compute_shard(model, first_id: int, texts: list[str], settings: Settings,
                  *, batched: bool = True, prepass: dict | None = None) -> dict[str, pd.DataFrame]:
    """The tables of texts[0..] with ids first_id, first_id + 1, ... (module docstring).
    prepass: the corpus-level inputs by product ({"nll": attention.sweeps.table.prepass,
    "importance": attention.importance.product.prepass})."""
    if any(w in CAPTURED for w in settings.what):
        groups, errors = capture(model, texts, batched=batched, limit=settings.batch_size)
    else:
        groups, errors = _encoded(model, texts)
    cls, sep = special_names(model)
    special = set(model.special_ids)
    pieces = [0] * len(texts)
    frames: dict[str, list[pd.DataFrame]] = {"pieces": [], "stats": [], "qk": []}
    for group in groups:
        text_ids = [first_id + i for i in group.index]
        for i, ids in zip(group.index, group.ids):
            pieces[i] = len(ids)
        frames["pieces"].append(_pieces(group, text_ids, special))
        if "stats" in settings.what:
            frames["stats"].append(_stats(group, text_ids, special, cls, sep))
        if "qk" in settings.what:
            frames["qk"].append(_qk(group, text_ids, settings.sample))
    prepass = prepass or {}
    nll = _nll(model, first_id, groups, errors, settings, prepass.get("nll") or {}) \
        if "nll" in settings.what else None      # before "texts": it records texts too short
    rows = {}
    if "importance" in settings.what:             # before "texts": it records texts refused
        ok = [i for i, err in enumerate(errors) if not err]
        rows = _importance(model, [texts[i] for i in ok], [first_id + i for i in ok], errors,
                           ok, prepass["importance"])
    tables = {"texts": pd.DataFrame({"text_id": np.arange(first_id, first_id + len(texts)),
                                     "text": texts, "pieces": pieces, "error": errors})}
    tables["pieces"] = _concat(frames["pieces"], ["text_id", "position", "token", "special"])
    for name in ("stats", "qk"):
        if name in settings.what:
            tables[name] = _concat(frames[name], None)
    tables["nll"] = nll
    tables.update(rows)
    return {name: frame for name, frame in tables.items() if frame is not None}


def _concat(frames: list[pd.DataFrame], columns) -> pd.DataFrame | None:
    """The groups' rows in text order (a batch runs its texts by length)."""
    if frames:
        return pd.concat(frames, ignore_index=True).sort_values(
            "text_id", kind="stable", ignore_index=True)
    return pd.DataFrame(columns=columns) if columns else None
