"""Token importance: how much each piece of a text moves the model's target (targets.py),
by occlusion, gradient x input and integrated gradients, beside attention-based scores read
where the output reads them.

Columns of token_importance (l = layer; p = the readout weights over rows, targets.Target.rows):
    occlusion         change of the target when the piece is removed ("remove", exact) or
                      replaced by the mask, else unknown, else pad piece ("replace"), for
                      every piece, special ones too (so "words only" off has a target for
                      [CLS] and [SEP]); NaN for a masked LM's m; every text's variants in
                      shared padded batches
    gradient          sentence model: ||J_j x_j||, J_j = de/dx_j (forward-mode, one tangent
                      per piece); LMs: d log p / dx_j . x_j (signed)
    integrated_gradients, ig_gap   Captum's LayerIntegratedGradients on the word embeddings,
                      baseline = the pad (else mask, else unknown) piece at every non-special
                      position (special pieces kept), N_STEPS Gauss-Legendre steps; target
                      s(x) = cos(e(x), e(text)) or the log p; ig_gap = sum of attributions -
                      (f(x) - f(baseline)), one value per text
    attention_<l>     p . mean over heads of layer l's weights
    rollout_<l>       p . rollout after layer l;  flow_<l>: attention flow of the readout
                      (a super-source feeding row i with capacity p_i; for one row: that row's
                      flow); NaN beyond flow.MAX_PIECES pieces
    norm_<l>          Kobayashi's sum_i p_i ||alpha_ij f(x_j)||, mean over heads
    rollout, flow     the last layer's;  target: what was measured (Target.label)
    special, unknown  the tokenizer's special pieces ([CLS], [SEP], [UNK], ...); unknown: the
                      pieces its vocabulary could not read (targets.unknown_id)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.autograd.forward_ad as fwAD

from attention import config
from attention import models as M
from attention.errors import UserError
from attention.importance import batch as B
from attention.importance import targets as T
from attention.importance.batch import Batch, batch_of, chunks, forward_batch, ids_of, pooled
from attention.measures import flow as flowlib
from attention.measures.rank import spearman
from attention.measures.rollout import rollout

MAX_PIECES = config.IMPORTANCE_MAX_PIECES
MAX_TOTAL_PIECES = config.IMPORTANCE_MAX_TOTAL_PIECES
N_STEPS = 32
SCORES = ("attention", "rollout", "flow", "norm")
METHODS = ("occlusion", "gradient", "integrated_gradients")


@dataclass(frozen=True, eq=False)
class Item:
    """One text as measured: its own ids, the ids the target reads, its run on those."""
    ids: list[int]
    read: list[int]
    run: M.ModelRun
    target: T.Target
    special: list[bool]


def item(model: M.LoadedModel, text: str, *, target=None, mask_at=None) -> Item:
    ids = ids_of(model, text)
    m = None
    if model.head == "masked_lm" and not model.is_causal:
        m = T.default_mask_at(model, ids) if mask_at is None else mask_at
    run = model.run(text, mask_at=m)
    tgt = T.target_of(model, run, ids, target=target, mask_at=m)
    return Item(ids, tgt.prepare(ids, T.mask_id(model)), run, tgt, T.special_mask(model, ids))


def piece_for(model: M.LoadedModel, order=("mask", "unk", "pad", "eos")) -> int:
    """The first of the tokenizer's pieces named in `order` that it has (the end-of-text piece
    last: a byte-level GGUF vocabulary may have no other)."""
    for name in order:
        got = getattr(model.tokenizer, f"{name}_token_id", None)
        if got is not None:
            return int(got)
    raise ValueError(f"{model.name}: the tokenizer has none of the pieces {order}")


def check_texts(model: M.LoadedModel, texts) -> None:
    """UserError when a text (or all of them) has more pieces than this page measures
    (MAX_PIECES, MAX_TOTAL_PIECES), or when the model cannot read it (LoadedModel.encode)."""
    total = 0
    for index, text in enumerate(texts):
        n = len(ids_of(model, text))
        if n > MAX_PIECES:
            raise UserError("importance.too_long", text=index + 1, pieces=n, limit=MAX_PIECES)
        total += n
    if total > MAX_TOTAL_PIECES:
        raise UserError("importance.too_many_pieces", pieces=total, limit=MAX_TOTAL_PIECES)


# ---------------------------------------------------------------------------- occlusion


def occlude(model: M.LoadedModel, items: list[Item], mode: str = "remove") -> list[torch.Tensor]:
    """Per item (n,) change of the target with each piece removed or replaced; every
    variant of every item in shared padded batches."""
    if mode not in ("remove", "replace"):
        raise ValueError(f"occlusion is 'remove' or 'replace', not {mode!r}")
    fill = piece_for(model) if mode == "replace" else None
    rows, where, owner = [], [], []
    for k, it in enumerate(items):
        m = it.target.at
        for j in range(len(it.read)):
            if j == m or (mode == "remove" and len(it.read) < 2):
                continue
            if mode == "remove":
                rows.append(it.read[:j] + it.read[j + 1:])
                where.append(0 if m is None else m - (j < m))
            else:
                rows.append(it.read[:j] + [fill] + it.read[j + 1:])
                where.append(0 if m is None else m)
            owner.append((k, j))
    out = [torch.full((len(it.read),), float("nan")) for it in items]
    if rows:
        got = values_of(model, items, rows, where, [k for k, _ in owner])
        base = torch.stack([T.of_run(model, items[k].target, items[k].run) for k, _ in owner])
        for (k, j), value in zip(owner, T.change(base, got)):
            out[k][j] = float(value)
    return out


def values_of(model: M.LoadedModel, items: list[Item], rows, where, owner) -> torch.Tensor:
    """The target of each id list, rows[i] read with its item's target items[owner[i]]
    (m at where[i] for a masked LM), in shared padded batches: (len(rows), hidden) or
    (len(rows),)."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out = [None] * len(rows)
    kind = items[0].target.kind
    for part in chunks(len(rows), max(len(r) for r in rows)):
        picked = order[part]
        batch = batch_of([rows[i] for i in picked])
        logits, last = forward_batch(model, batch)
        if kind == "embedding":
            got = torch.nn.functional.normalize(pooled(last, batch.real), dim=-1)
        else:
            at = batch.last if kind == "next" else torch.tensor([where[i] for i in picked])
            got = _logp(logits, at, torch.tensor([items[owner[i]].target.token for i in picked]))
        for i, value in zip(picked, got):
            out[i] = value
    return torch.stack(out)


# ---------------------------------------------------------------------------- gradients


def _logp(logits, at, token):
    rows = logits[torch.arange(logits.shape[0]), at]                   # (b, vocab)
    return torch.log_softmax(rows, dim=-1)[torch.arange(logits.shape[0]), token]


def _at_and_token(items: list[Item], batch: Batch, picked):
    tgt = [items[k].target for k in picked]
    at = batch.last if tgt[0].kind == "next" else torch.tensor([t.at for t in tgt])
    return at, torch.tensor([t.token for t in tgt])


def gradient_x_input(model: M.LoadedModel, items: list[Item]) -> list[torch.Tensor]:
    """Per item (n,): ||J_j x_j|| for a sentence model (forward mode: batch elements are
    (item, piece) pairs, the tangent x_j at piece j only), d log p / dx_j . x_j for an LM
    (one backward for a batch of items)."""
    if items[0].target.kind == "embedding":
        return _jvp_norms(model, items)
    out = [None] * len(items)
    order = sorted(range(len(items)), key=lambda k: len(items[k].read))
    for part in chunks(len(items), max(len(it.read) for it in items)):
        picked = order[part]
        batch = batch_of([items[k].read for k in picked])
        leaf = {}

        def as_leaf(x):
            leaf["x"] = x.detach().requires_grad_(True)                # (b, n, hidden)
            return leaf["x"]

        logits, _ = forward_batch(model, batch, grad=True, embed_hook=as_leaf)
        at, token = _at_and_token(items, batch, picked)
        (g,) = torch.autograd.grad(_logp(logits, at, token).sum(), leaf["x"])
        gx = (g * leaf["x"]).sum(dim=-1).detach()                      # (b, n)
        for row, k in enumerate(picked):
            out[k] = gx[row, :len(items[k].read)].float()
    return out


def _jvp_norms(model: M.LoadedModel, items: list[Item]) -> list[torch.Tensor]:
    pairs = [(k, j) for k, it in enumerate(items) for j in range(len(it.read))]
    out = [torch.empty(len(it.read)) for it in items]
    order = sorted(range(len(pairs)), key=lambda i: len(items[pairs[i][0]].read))
    for part in chunks(len(pairs), max(len(it.read) for it in items)):
        picked = [pairs[i] for i in order[part]]
        batch = batch_of([items[k].read for k, _ in picked])
        at = torch.tensor([j for _, j in picked])
        rows = torch.arange(len(picked))

        def dual(x):                                                   # (b, n, hidden)
            tangent = torch.zeros_like(x)
            tangent[rows, at] = x[rows, at]
            return fwAD.make_dual(x, tangent)

        with fwAD.dual_level():
            _, last = forward_batch(model, batch, embed_hook=dual)
            e = torch.nn.functional.normalize(pooled(last, batch.real), dim=-1)
            tangent = fwAD.unpack_dual(e).tangent                      # (b, hidden)
        for (k, j), value in zip(picked, tangent.norm(dim=-1)):
            out[k][j] = float(value)
    return out


class _Words(torch.nn.Module):
    """The word embeddings as a layer of their own (GPT-2 calls its word embedding twice,
    once on token types): what LayerIntegratedGradients attributes to."""
    def forward(self, x):
        return x


def integrated_gradients(model: M.LoadedModel, items: list[Item], n_steps: int = N_STEPS):
    """Per item ((n,) attributions summed over the hidden dimension, completeness gap)."""
    from captum.attr import LayerIntegratedGradients

    words = _Words()
    base_piece = piece_for(model, ("pad", "mask", "unk", "eos"))
    embedding = items[0].target.kind == "embedding"

    def f(ids, real, at, token, ref):
        batch = Batch(ids, real)
        logits, last = forward_batch(model, batch, grad=True, embed_hook=words)
        if embedding:
            e = torch.nn.functional.normalize(pooled(last, real), dim=-1)
            return (e * ref).sum(dim=-1)
        return _logp(logits, batch.last if items[0].target.kind == "next" else at, token)

    lig = LayerIntegratedGradients(f, words)
    out = [None] * len(items)
    order = sorted(range(len(items)), key=lambda k: len(items[k].read))
    longest = max(len(it.read) for it in items)
    for part in chunks(len(items), longest, max(1, B.BATCH_TOKENS // n_steps)):
        picked = order[part]
        batch = batch_of([items[k].read for k in picked])
        base = batch.ids.clone()
        for row, k in enumerate(picked):
            for j, s in enumerate(items[k].special):
                if not s and j != items[k].target.at:
                    base[row, j] = base_piece
        at, token = (_at_and_token(items, batch, picked) if not embedding
                     else (torch.zeros(len(picked), dtype=torch.long),) * 2)
        ref = torch.stack([items[k].run.embedding for k in picked]) if embedding \
            else torch.zeros(len(picked), 1)
        attr, gap = lig.attribute(batch.ids, baselines=base, n_steps=n_steps,
                                  additional_forward_args=(batch.real, at, token, ref),
                                  return_convergence_delta=True)
        summed = attr.sum(dim=-1).detach()                             # (b, n)
        for row, k in enumerate(picked):
            out[k] = (summed[row, :len(items[k].read)].float(), float(gap[row]))
    return out


# ---------------------------------------------------------------------------- attention


def pooled_flow(weights: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Attention flow of a readout p (n,): per layer l, the maximum flow from a super-source
    (edges of capacity p_i to row i after layer l) to each input token, normalised to sum
    to 1 (as flow.attention_flow for one row). (layers, n); NaN beyond flow.MAX_PIECES."""
    layers, _, n, _ = weights.shape
    if n > flowlib.MAX_PIECES:
        return torch.full((layers, n), float("nan"))
    nz = torch.nonzero(p).flatten()
    if len(nz) == 1:
        return flowlib.attention_flow(weights, int(nz[0]))
    graph = flowlib._graph(flowlib.flow_capacities(weights))
    size = graph.shape[0]
    caps = np.rint(p.double().numpy() * flowlib.SCALE).astype(np.int32)
    out = np.zeros((layers, n))
    from scipy.sparse import csr_matrix, hstack, vstack   # lazily: docs/architecture.md
    for layer in range(layers):
        edges = np.zeros(size + 1, dtype=np.int32)
        edges[(layer + 1) * n:(layer + 2) * n] = caps
        g = vstack([hstack([graph, csr_matrix((size, 1), dtype=np.int32)]),
                    csr_matrix(edges[None])]).tocsr().astype(np.int32)
        for j in range(n):
            out[layer, j] = flowlib.max_flow_value(g, size, j)
    total = out.sum(axis=1, keepdims=True)
    return torch.from_numpy(out / np.where(total > 0, total, 1.0)).float()


def attention_scores(model: M.LoadedModel, run: M.ModelRun, p: torch.Tensor) -> dict:
    """name -> (layers, n): the attention-based scores read with the readout p (n,)."""
    w = run.weights                                                    # (layers, heads, n, n)
    scores = {"attention": p @ w.mean(dim=1),
              "rollout": p @ rollout(w),
              "flow": pooled_flow(w, p)}
    norms = []
    for layer in range(model.layers):
        f = model.value_vectors(run, layer)                            # (heads, n, hidden)
        norms.append(torch.full((run.n,), float("nan")) if f is None
                     else ((p @ w[layer]) * f.norm(dim=-1)).mean(dim=0))
    scores["norm"] = torch.stack(norms)
    return scores


# ---------------------------------------------------------------------------- the frame


def token_importance(model: M.LoadedModel, texts, *, occlusion: str = "remove",
                     target: str | None = None, mask_at: int | None = None) -> pd.DataFrame:
    """One row per piece of every text, special pieces included and flagged (module
    docstring for the columns). target: a causal LM's next word (default its top piece);
    mask_at: a masked LM's m (default the last piece that is not special)."""
    items = [item(model, text, target=target, mask_at=mask_at) for text in texts]
    unknown = T.unknown_id(model)
    if not items:
        raise ValueError("token_importance needs at least one text.")
    occ = occlude(model, items, occlusion)
    grads = gradient_x_input(model, items)
    igs = integrated_gradients(model, items)
    frames = []
    for index, it in enumerate(items):
        run = it.run
        frame = pd.DataFrame({
            "text": index, "position": range(run.n),
            "token": list(model.pieces(it.ids)),
            "special": it.special, "unknown": [i == unknown for i in it.ids],
            "occlusion": occ[index].numpy(),
            "gradient": grads[index].numpy(), "integrated_gradients": igs[index][0].numpy(),
            "ig_gap": igs[index][1]})
        for name, values in attention_scores(model, run, it.target.rows(run.n)).items():
            for layer in range(model.layers):
                frame[f"{name}_{layer}"] = values[layer].numpy()
        last = model.layers - 1
        frame["rollout"] = frame[f"rollout_{last}"]
        frame["flow"] = frame[f"flow_{last}"]
        frame["target"] = it.target.label
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def layer_agreement(tokens: pd.DataFrame, *, words_only: bool = True) -> pd.DataFrame:
    """Per layer, score and method: Spearman of the attention-based score with occlusion,
    gradient x input and integrated gradients, per text and averaged over the texts where
    it is defined. Columns layer, score, target, spearman, texts. words_only: leave out
    special pieces ([CLS], [SEP], ...)."""
    if words_only:
        tokens = tokens[~tokens["special"]]
    layers = sorted(int(c.rsplit("_", 1)[1]) for c in tokens if c.startswith("rollout_"))
    rows = []
    for layer in layers:
        for score in SCORES:
            for method in METHODS:
                per_text = [spearman(g[f"{score}_{layer}"], g[method])
                            for _, g in tokens.groupby("text")]
                got = [r for r in per_text if not math.isnan(r)]
                rows.append({"layer": layer, "score": score, "target": method,
                             "spearman": float(np.mean(got)) if got else float("nan"),
                             "texts": len(got)})
    return pd.DataFrame(rows)
