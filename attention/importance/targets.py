"""What a model outputs for a text, as the quantity every importance score is measured on
(docs/science.md, "Targets and readouts"):

    sentence model (head "none")  e = unit mean-pooled embedding (hidden,); change 1 - cos
    causal LM                     log p(t | text), t the top next piece after the text or a
                                  word the caller gives; change = the drop in log p(t)
    masked LM                     log p(true piece at m | text with m masked), m given or the
                                  last piece that is not special; change = the drop

and the readout: the weights over the attention rows the output is read from (uniform over
real rows for mean pooling, the last row, row m).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention import models as M
from attention.errors import UserError
from attention.importance.batch import Batch, batch_of, chunks, forward_batch, pooled


@dataclass(frozen=True)
class Target:
    """The target of one text. kind: "embedding", "next" or "masked"; token: t ("next") or
    the true piece at m ("masked"); at: m ("masked"); label: what is measured, in words."""
    kind: str
    token: int | None = None
    at: int | None = None
    label: str = ""

    def prepare(self, ids: list[int], mask_id: int | None = None) -> list[int]:
        """The ids the target reads: the text's own, with piece m masked for "masked"."""
        if self.kind != "masked":
            return list(ids)
        out = list(ids)
        out[self.at] = mask_id
        return out

    def rows(self, n: int) -> torch.Tensor:
        """(n,) the readout: how the output weighs the attention rows of the n positions."""
        if self.kind == "embedding":
            return torch.full((n,), 1.0 / n)
        p = torch.zeros(n)
        p[n - 1 if self.kind == "next" else self.at] = 1.0
        return p

    def change(self, base: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return change(base, other)


def change(base: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """How much `other` moved from `base`: 1 - cos for embeddings (rows (b, hidden), unit
    length), the drop base - other for log probabilities ((b,) or scalars)."""
    if base.ndim >= 2 or other.ndim >= 2:
        return 1.0 - (other * base).sum(dim=-1)
    return base - other


def special_mask(model: M.LoadedModel, ids) -> list[bool]:
    return [i in model.special_ids for i in ids]


def unknown_id(model: M.LoadedModel) -> int | None:
    """The tokenizer's unknown piece ([UNK], <unk>), None when it has none or its id doubles
    as another special piece (a byte-level tokenizer's <|endoftext|>: it never stands for a
    word the vocabulary could not read)."""
    tok = model.tokenizer
    unk = getattr(tok, "unk_token_id", None)
    roles = {getattr(tok, f"{name}_token_id", None)
             for name in ("bos", "eos", "pad", "cls", "sep", "mask")}
    return None if unk is None or unk in roles else int(unk)


def piece_id(model: M.LoadedModel, word: str) -> int:
    """The one piece of `word` after a text (with a leading space first, as byte-level
    tokenizers mark a new word); ValueError when it is more than one piece."""
    for form in (" " + word.strip(), word.strip()):
        got = model.tokenizer(form, add_special_tokens=False)["input_ids"]
        if len(got) == 1:
            return int(got[0])
    raise ValueError(f"'{word}' is more than one piece for {model.name}: give a target "
                     f"word the tokenizer keeps whole.")


def default_mask_at(model: M.LoadedModel, ids) -> int:
    """The last piece that is not special (a masked LM's default m)."""
    words = [i for i, s in enumerate(special_mask(model, ids)) if not s]
    if not words:
        raise UserError("model.bad_position", position=len(ids) - 1, last=len(ids) - 1)
    return words[-1]


def mask_id(model: M.LoadedModel) -> int | None:
    return getattr(model.tokenizer, "mask_token_id", None)


def target_of(model: M.LoadedModel, run: M.ModelRun, ids, *, target: str | None = None,
              mask_at: int | None = None) -> Target:
    """The target of a text from its run (for a masked LM: the run with m masked, i.e.
    model.run(text, mask_at=m)); ids: the text's own ids (before masking)."""
    piece = lambda i: model.pieces([i])[0]                             # noqa: E731
    if model.head == "none":
        return Target("embedding", label="cos(e, e(text))")
    if model.is_causal:
        t = piece_id(model, target) if target is not None else int(run.logits[-1].argmax())
        return Target("next", token=t, label=f"log p('{piece(t)}')")
    m = default_mask_at(model, ids) if mask_at is None else mask_at
    true = int(ids[m])
    return Target("masked", token=true, at=m, label=f"log p('{piece(true)}' at {m})")


def values(model: M.LoadedModel, target: Target, logits, last, batch: Batch,
           where: torch.Tensor | None = None) -> torch.Tensor:
    """The target of every batch element: (b, hidden) unit embeddings, or (b,) log p of the
    target piece at each element's readout position (the last real piece; `where` (b,) for
    "masked", where m may have moved)."""
    if target.kind == "embedding":
        return F.normalize(pooled(last, batch.real), dim=-1)
    at = batch.last if target.kind == "next" else where
    rows = logits[torch.arange(logits.shape[0]), at]                   # (b, vocab)
    return F.log_softmax(rows.float() if rows.dtype == torch.float16 else rows,
                         dim=-1)[:, target.token]


def of_run(model: M.LoadedModel, target: Target, run: M.ModelRun) -> torch.Tensor:
    """The target of a text from its own run: (hidden,) or a scalar."""
    if target.kind == "embedding":
        return run.embedding
    at = run.n - 1 if target.kind == "next" else target.at
    return F.log_softmax(run.logits[at], dim=-1)[target.token]


def evaluate(model: M.LoadedModel, target: Target, rows: list[list[int]],
             where: list[int] | None = None, **kwargs) -> torch.Tensor:
    """The target of each id list (padded batches, chunked): (len(rows), hidden) or
    (len(rows),). where: for "masked", m in each list; kwargs go to `forward_batch`."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out = [None] * len(rows)
    longest = max(len(r) for r in rows)
    for part in chunks(len(rows), longest):
        picked = order[part]
        batch = batch_of([rows[i] for i in picked])
        at = None if where is None else torch.tensor([where[i] for i in picked])
        logits, last = forward_batch(model, batch, **kwargs)
        for i, value in zip(picked, values(model, target, logits, last, batch, at)):
            out[i] = value
    return torch.stack(out)
