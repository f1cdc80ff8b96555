"""Does the model use what it attends to? Attention set against what the model outputs.

    token_importance(model, texts, *, occlusion="remove", target=None, mask_at=None)
                                   -> DataFrame, one row per (text, piece)     (tokens.py)
    head_importance(model, texts)  -> DataFrame, one row per (layer, head)     (heads.py)
    pruning_curve, temperature_sweep, Metric (paraphrase retrieval or loss)    (heads.py)
    layer_agreement(tokens)        -> Spearman per layer, score and method     (tokens.py)
    agreement(table), faithfulness(model, texts)   intervals, null bands, ERASER
                                                   (concordance.py, erasure.py)

The target is what the model outputs (targets.py; docs/science.md "Targets and readouts"):

    model kind        target                       read from      occlusion of j
    sentence model    e, unit mean-pooled embedding mean of rows   1 - cos(e(text), e(text - j))
    causal LM         log p(t | text), t top next   the last row   drop in log p(t)
    masked LM         log p(piece at m | m masked)  row m          drop in that log p

gradient x input: ||J_j x_j|| (sentence model), d log p / dx_j . x_j (LMs); integrated
gradients: Captum's LayerIntegratedGradients on the word embeddings, on
s(x) = cos(e(x), e(text)) or the log p. Modules: batch (batched forwards, gates, chunks),
targets, tokens, heads, concordance (agreement), erasure (faithfulness), curves; the page's
results, shipped.

The face names the API a caller needs; the plumbing (batched forwards, single methods,
targets) is imported from its module (`from attention.importance import batch`).
"""
from __future__ import annotations

from attention.importance.concordance import agreement
from attention.importance.erasure import faithfulness
from attention.importance.heads import Metric, head_importance, pruning_curve, temperature_sweep
from attention.importance.tokens import METHODS, SCORES, layer_agreement, token_importance

__all__ = ["token_importance", "head_importance", "agreement", "faithfulness",
           "layer_agreement", "pruning_curve", "temperature_sweep", "Metric",
           "METHODS", "SCORES"]
