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

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from attention import config
from attention import models as M
from attention.importance import targets as T
from attention.importance.batch import (Batch, attention_modules, batch_of, chunks, forward,
                                        ids_of, pooled, projections)
from attention.importance.tokens import Item, item
from attention.measures.heads import head_stats

TAUS = tuple(float(2.0 ** e) for e in np.linspace(-2, 2, 7))   # 0.25 ... 4
PAIRS_FILE = config.DATA / "sentence_pairs.tsv"


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
        logits, last = forward(model, full, expand=expand)
        got = T.values(model, it.target, logits, last, copies, _where(it, model.heads))
        out.append(T.change(base.expand(model.heads, *base.shape[1:]), got))
    return torch.stack(out).float()                                    # (layers, heads)


def mean_outputs(model: M.LoadedModel, items: list[Item]) -> torch.Tensor:
    """(layers, heads, d_head): each head's slice at the output projection, averaged over
    every real position of every text."""
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
            forward(model, batch)
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
                _, last = forward(model, batch, expand=(layer, rows))
                e = F.normalize(pooled(last, copies.real), dim=-1)     # (heads, hidden)
                out.append(fwAD.unpack_dual(e).tangent.norm(dim=-1))
        return torch.stack(out)                                        # (layers, heads)
    gate = torch.ones(model.layers, model.heads, requires_grad=True)
    logits, last = forward(model, batch, gate=gate, grad=True)
    y = T.values(model, it.target, logits, last, batch, _where(it, 1))[0]
    (g,) = torch.autograd.grad(y, gate)
    return g.abs().detach()


def per_layer(importance: torch.Tensor) -> torch.Tensor:
    """(layers, heads) each layer divided by its L2 norm over heads (Michel et al. 2019)."""
    norm = importance.norm(dim=1, keepdim=True)
    return importance / torch.where(norm > 0, norm, 1.0)


def head_importance(model: M.LoadedModel, texts, *, target: str | None = None,
                    mask_at: int | None = None) -> pd.DataFrame:
    """One row per (layer, head): layer, head, ablation, mean_ablation, gradient,
    gradient_raw, entropy, max_weight (module docstring), each over the texts."""
    items = [item(model, text, target=target, mask_at=mask_at) for text in texts]
    fill = mean_outputs(model, items)
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


@dataclass(frozen=True)
class Pairs:
    first: tuple[str, ...]
    second: tuple[str, ...]
    label: tuple[int, ...]       # 1 = paraphrase, 0 = not


@lru_cache(maxsize=1)
def sentence_pairs(path: str = str(PAIRS_FILE)) -> Pairs:
    """The project's sentence pairs (attention/data/sentence_pairs.tsv, see its README)."""
    first, second, label = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        a, b, y = line.split("\t")
        if y == "label":
            continue
        first.append(a)
        second.append(b)
        label.append(int(y))
    return Pairs(tuple(first), tuple(second), tuple(label))


def ranking_accuracy(similarity, label) -> float:
    """Share of (paraphrase, non-paraphrase) pairs of pairs in which the paraphrase pair has
    the higher similarity (ties count half): the ROC AUC of the similarities."""
    s, y = np.asarray(similarity, dtype=float), np.asarray(label)
    pos, neg = s[y == 1], s[y == 0]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


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
    a sentence model's ranking accuracy on the sentence pairs; an LM's negative mean loss
    over the texts (every piece it predicts). `__call__(gate, interventions)` also returns
    the mean max weight per layer (over heads and real query rows)."""

    def __init__(self, model: M.LoadedModel, texts) -> None:
        self.model = model
        if model.head == "none":
            pairs = sentence_pairs()
            self.name = "ranking_accuracy"
            sentences = sorted({*pairs.first, *pairs.second})      # each once
            where = {text: i for i, text in enumerate(sentences)}
            self.left = torch.tensor([where[text] for text in pairs.first])
            self.right = torch.tensor([where[text] for text in pairs.second])
            self.label = pairs.label
        else:
            self.name = "negative_loss"
            sentences = list(texts)
        self.batch = batch_of([ids_of(model, s) for s in sentences])

    def units(self, gate=None, interventions=()) -> tuple[np.ndarray, np.ndarray]:
        """One forward: the metric's units (float64; the pairs' cosine similarities, or each
        text's negative mean loss) and the mean max weight per layer."""
        model, batch = self.model, self.batch
        sharp = []

        def grab(_module, _args, out):
            w = out[1]                                                 # (b, heads, n, n)
            rows = w.amax(dim=-1).mean(dim=1)                          # (b, n)
            sharp.append(float(rows[batch.real].mean()))

        hooks = [m.register_forward_hook(grab) for m in attention_modules(model)]
        try:
            with torch.no_grad():
                logits, last = forward(model, batch, gate=gate, interventions=interventions)
        finally:
            for h in hooks:
                h.remove()
        if self.name == "ranking_accuracy":
            out = F.normalize(pooled(last, batch.real), dim=-1)
            units = (out[self.left] * out[self.right]).sum(dim=-1)      # (pairs,)
        else:
            units = -token_nll(model, logits, batch).nanmean(dim=1)     # (texts,)
        return units.double().numpy(), np.asarray(sharp)

    def value(self, units: np.ndarray) -> float:
        """The metric from its units."""
        if self.name == "ranking_accuracy":
            return ranking_accuracy(units, self.label)
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
