"""Head importance (Michel et al. 2019) on the targets of targets.py, and the output metric
of the pruning curve and the temperature sweep.

Each head's output slice at its layer's output projection is multiplied by a gate xi_h.
    ablation       mean over texts of the target's change with the head zeroed (xi_h = 0)
    mean_ablation  the same with the head's slice replaced by its mean over every real
                   position of every text (the corpus)
    gradient       mean over texts of |d f / d xi_h| at xi = 1 (an LM's log p), or of
                   ||d e / d xi_h|| (a sentence model's unit embedding, forward mode), then
                   divided by its L2 norm over the heads of its layer (Michel et al.)
    gradient_raw   before that division
    entropy, max_weight   measures.heads.head_stats, mean over rows, then over texts
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from attention import models as M
from attention.importance import targets as T
from attention.importance.batch import (Batch, attention_modules, batch_of, chunks, forward_batch,
                                        ids_of, pooled, projections)
from attention.importance.tokens import Item, item
from attention.measures.heads import head_stats

TAUS = tuple(float(2.0 ** e) for e in np.linspace(-2, 2, 7))   # 0.25 ... 4


def _copies(batch: Batch, c: int) -> Batch:
    return Batch(batch.ids.expand(c, -1), batch.real.expand(c, -1))


def _where(it: Item, c: int) -> torch.Tensor | None:
    return None if it.target.at is None else torch.full((c,), it.target.at)


def head_ablation(model: M.LoadedModel, it: Item, fill=None) -> torch.Tensor:
    """(layers, heads) change of one text's target with each head zeroed, or replaced by
    fill[l] (layers, heads, d_head). Per layer one forward: batch 1 up to that layer's output
    projection, where the input is copied once per head (layers below computed once)."""
    full = batch_of([it.read])
    base = T.of_run(model, it.target, it.run)[None]
    copies = _copies(full, model.heads)
    rows = 1.0 - torch.eye(model.heads)                                # (heads, heads)
    out = []
    for layer in range(model.layers):
        expand = (layer, rows) if fill is None else (layer, rows, fill[layer])
        logits, last = forward_batch(model, full, expand=expand)
        got = T.values(model, it.target, logits, last, copies, _where(it, model.heads))
        out.append(T.change(base.expand(model.heads, *base.shape[1:]), got))
    return torch.stack(out).float()                                    # (layers, heads)


def mean_outputs(model: M.LoadedModel, items: list) -> torch.Tensor:
    """(layers, heads, d_head): each head's slice at the output projection, averaged over
    every real position of every text (items: Items, or texts)."""
    items = [it if isinstance(it, Item) else item(model, it) for it in items]
    total = torch.zeros(model.layers, model.heads * model.d_head, dtype=torch.float64)
    count = 0
    batch_box = {}

    def hook_for(layer):
        def pre(_module, args):
            real = batch_box["b"].real
            total[layer] += args[0][real].double().sum(dim=0)
        return pre

    hooks = [m.register_forward_pre_hook(hook_for(layer))
             for layer, m in enumerate(projections(model))]
    try:
        for part in chunks(len(items), max(len(it.read) for it in items)):
            batch_box["b"] = batch = batch_of([it.read for it in items[part]])
            forward_batch(model, batch)
            count += int(batch.real.sum())
    finally:
        for h in hooks:
            h.remove()
    return (total / count).float().view(model.layers, model.heads, model.d_head)


def head_gradient(model: M.LoadedModel, it: Item) -> torch.Tensor:
    """(layers, heads) |d log p / d xi| (one backward), or ||d e / d xi_h|| for a sentence
    model (forward mode: per layer, one copy per head from that layer's output projection
    on, each with its own gate's tangent)."""
    batch = batch_of([it.read])
    if it.target.kind == "embedding":    # per layer: below it once, above it one copy per head
        out = []
        copies = _copies(batch, model.heads)
        for layer in range(model.layers):
            with fwAD.dual_level():
                rows = fwAD.make_dual(torch.ones(model.heads, model.heads), torch.eye(model.heads))
                _, last = forward_batch(model, batch, expand=(layer, rows))
                e = F.normalize(pooled(last, copies.real), dim=-1)     # (heads, hidden)
                out.append(fwAD.unpack_dual(e).tangent.norm(dim=-1))
        return torch.stack(out)                                        # (layers, heads)
    gate = torch.ones(model.layers, model.heads, requires_grad=True)
    logits, last = forward_batch(model, batch, gate=gate, grad=True)
    y = T.values(model, it.target, logits, last, batch, _where(it, 1))[0]
    (g,) = torch.autograd.grad(y, gate)
    return g.abs().detach()


def per_layer(importance: torch.Tensor) -> torch.Tensor:
    """(layers, heads) each layer divided by its L2 norm over heads (Michel et al. 2019)."""
    norm = importance.norm(dim=1, keepdim=True)
    return importance / torch.where(norm > 0, norm, 1.0)


def head_importance(model: M.LoadedModel, texts, *, target: str | None = None,
                    mask_at: int | None = None, fill: torch.Tensor | None = None) -> pd.DataFrame:
    """One row per (layer, head): layer, head, ablation, mean_ablation, gradient,
    gradient_raw, entropy, max_weight (module docstring), each over the texts. fill: the
    corpus's mean head outputs (layers, heads, d_head), mean_outputs over every text of the
    corpus, when `texts` are a part of it (else they are the corpus: computed here), so that
    parts averaged by their texts equal the whole."""
    items = [item(model, text, target=target, mask_at=mask_at) for text in texts]
    fill = mean_outputs(model, items) if fill is None else fill
    ablation, mean_ablation, grad, entropy, sharp = [], [], [], [], []
    for it in items:
        ablation.append(head_ablation(model, it))
        mean_ablation.append(head_ablation(model, it, fill))
        grad.append(head_gradient(model, it))
        stats = head_stats(it.run.weights, it.run.tokens)
        entropy.append(stats["entropy"])
        sharp.append(stats["max_weight"])
    ll, hh = torch.meshgrid(torch.arange(model.layers), torch.arange(model.heads), indexing="ij")
    mean = lambda xs: torch.stack(xs).mean(dim=0)  # noqa: E731
    flat = lambda x: x.flatten().numpy()  # noqa: E731
    raw = mean(grad)
    return pd.DataFrame({"layer": flat(ll), "head": flat(hh), "ablation": flat(mean(ablation)),
                         "mean_ablation": flat(mean(mean_ablation)),
                         "gradient": flat(per_layer(raw)), "gradient_raw": flat(raw),
                         "entropy": flat(mean(entropy)), "max_weight": flat(mean(sharp))})


# ---------------------------------------------------------------------------- output metric


def token_nll(model: M.LoadedModel, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(b, n) NLL of each token (causal: from the tokens before it; masked: at its own
    position); NaN where a token is not predicted (a causal model's first, padding)."""
    ids, real = batch.ids, batch.real
    nll = torch.full(ids.shape, float("nan"), dtype=logits.dtype)
    if model.is_causal:
        ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        nll[:, 1:] = torch.where(real[:, 1:], ce, torch.nan)
    else:
        ce = F.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
        nll = torch.where(real, ce, torch.nan)
    return nll


class Metric:
    """The output metric of the pruning curve and the temperature sweep, higher = better:
    a sentence model's paraphrase retrieval accuracy on sentence pairs (`pairs`, default
    attention.text.corpora.pairs("bundled:en"); measures.retrieval), an LM's negative mean loss
    over the texts (every piece it predicts). Its units, which intervals resample, are the
    pairs (each pair's mean hit over its two sentences) or the texts. `__call__(gate,
    interventions)` also returns the mean max weight per layer (over heads and real query
    rows of every sentence or text)."""

    def __init__(self, model: M.LoadedModel, texts, pairs=None) -> None:
        self.model = model
        if model.head == "none":
            if pairs is None:
                from attention.text.corpora import pairs as bundled_pairs
                pairs = bundled_pairs("bundled:en")
            self.name = "retrieval_accuracy"
            sentences = [s for pair in pairs for s in pair]            # pair p: rows 2p, 2p + 1
        else:
            self.name = "negative_loss"
            sentences = list(texts)
        self.rows = [ids_of(model, s) for s in sentences]
        self.count = len(self.rows) // 2 if self.name == "retrieval_accuracy" else len(self.rows)

    def units(self, gate=None, interventions=(), *, rr: bool = False):
        """Forwards in length-sorted chunks: the metric's units (float64 (units,): each pair's
        mean retrieval hit, or each text's negative mean loss) and the mean max weight per
        layer; with rr, also each pair's mean reciprocal rank (sentence models)."""
        from attention.measures.retrieval import retrieval_units

        model, rows = self.model, self.rows
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        sharp_sum = np.zeros(model.layers)
        real_rows = 0
        out = [None] * len(rows)
        for part in chunks(len(rows), max(len(r) for r in rows)):
            picked = order[part]
            batch = batch_of([rows[i] for i in picked])
            sums = []

            def grab(_module, _args, got, real=batch.real, sums=sums):
                w = got[1]                                             # (b, heads, n, n)
                sums.append(float(w.amax(dim=-1).mean(dim=1)[real].double().sum()))

            hooks = [m.register_forward_hook(grab) for m in attention_modules(model)]
            try:
                with torch.no_grad():
                    logits, last = forward_batch(model, batch, gate=gate,
                                                 interventions=interventions)
            finally:
                for h in hooks:
                    h.remove()
            sharp_sum += np.asarray(sums)
            real_rows += int(batch.real.sum())
            if self.name == "retrieval_accuracy":
                got = F.normalize(pooled(last, batch.real), dim=-1)    # (b, hidden)
            else:
                got = -token_nll(model, logits, batch).nanmean(dim=1)  # (b,)
            for i, value in zip(picked, got):
                out[i] = value
        values = torch.stack(out).double().numpy()
        sharp = sharp_sum / real_rows
        if self.name != "retrieval_accuracy":
            return (values, sharp, None) if rr else (values, sharp)
        hit, recip = retrieval_units(values)
        return (hit, sharp, recip) if rr else (hit, sharp)

    def value(self, units: np.ndarray) -> float:
        """The metric from its units: their mean."""
        return float(np.mean(units))

    def __call__(self, gate=None, interventions=()) -> tuple[float, np.ndarray]:
        units, sharp = self.units(gate, interventions)
        return self.value(units), sharp


def pruning_curve(model: M.LoadedModel, heads: pd.DataFrame, texts, *,
                  by: str = "ablation", steps: int = 12) -> pd.DataFrame:
    """Remove heads from least to most important (`heads[by]` ascending) and measure the
    metric: columns removed, metric, metric_name; about `steps` points from 0 to all."""
    metric = Metric(model, texts)
    order = heads.sort_values(by, kind="stable")[["layer", "head"]].to_numpy()
    count = len(order)
    points = sorted({*range(0, count + 1, max(1, count // steps)), count})
    rows = []
    for k in points:
        gate = torch.ones(model.layers, model.heads)
        for layer, head in order[:k]:
            gate[layer, head] = 0.0
        value, _ = metric(gate=gate)
        rows.append({"removed": k, "metric": value, "metric_name": metric.name})
    return pd.DataFrame(rows)


def temperature_sweep(model: M.LoadedModel, texts, layers=None, taus=TAUS) -> pd.DataFrame:
    """Every head of one layer at temperature tau (the "temperature" intervention), for each
    of `layers` (None = all) and tau: columns layer, tau, metric, max_weight (that layer's
    mean max weight), metric_name. One batched forward of the metric's sentences per point."""
    metric = Metric(model, texts)
    rows = []
    for layer in range(model.layers) if layers is None else layers:
        for tau in taus:
            value, sharp = metric(interventions=(M.Intervention("temperature", layer=layer,
                                                                value=float(tau)),))
            rows.append({"layer": layer, "tau": float(tau), "metric": value,
                         "max_weight": float(sharp[layer]), "metric_name": metric.name})
    return pd.DataFrame(rows)
