"""Does the model use what it attends to? Attention set against what the model outputs.

    token_importance(model, texts, *, occlusion="remove", target=None, mask_at=None)
                                   -> DataFrame, one row per (text, piece)     (tokens.py)
    head_importance(model, texts)  -> DataFrame, one row per (layer, head)     (heads.py)
    pruning_curve, temperature_sweep, Metric (paraphrase retrieval or loss)    (heads.py)
    layer_agreement(tokens)        -> Spearman per layer, score and method     (tokens.py)
    agreement(table), faithfulness(model, texts)   intervals, null bands, ERASER
                                                   (agreement.py, faithfulness.py)

The target is what the model outputs (targets.py; docs/science.md "Targets and readouts"):

    model kind        target                       read from      occlusion of j
    sentence model    e, unit mean-pooled embedding mean of rows   1 - cos(e(text), e(text - j))
    causal LM         log p(t | text), t top next   the last row   drop in log p(t)
    masked LM         log p(piece at m | m masked)  row m          drop in that log p

gradient x input: ||J_j x_j|| (sentence model), d log p / dx_j . x_j (LMs); integrated
gradients: Captum's LayerIntegratedGradients on the word embeddings, on
s(x) = cos(e(x), e(text)) or the log p. Modules: batch (batched forwards, gates, chunks),
targets, tokens, heads, agreement, faithfulness.
"""
from __future__ import annotations

from attention.importance.agreement import agreement
from attention.importance.batch import (BATCH_TOKENS, Batch, attention_modules, batch_of,
                                        chunks, expanded, forward, gated, ids_of, pooled)
from attention.importance.faithfulness import faithfulness
from attention.importance.heads import (TAUS, Metric, head_ablation, head_gradient,
                                        head_importance, mean_outputs, per_layer,
                                        pruning_curve, temperature_sweep, token_nll)
from attention.importance.targets import Target, change, target_of
from attention.importance.tokens import (MAX_PIECES, MAX_TOTAL_PIECES, METHODS, N_STEPS,
                                         SCORES, Item, attention_scores, check_texts,
                                         gradient_x_input, integrated_gradients, item,
                                         layer_agreement, occlude, pooled_flow,
                                         token_importance)
from attention.measures.rank import spearman

__all__ = [
    "agreement", "faithfulness", "token_importance", "head_importance", "layer_agreement",
    "pruning_curve", "temperature_sweep", "Metric", "spearman", "Target", "change", "target_of", "Item", "item",
    "occlude", "gradient_x_input", "integrated_gradients", "attention_scores", "pooled_flow",
    "head_ablation", "head_gradient", "mean_outputs", "per_layer", "token_nll", "check_texts",
    "Batch", "batch_of", "forward", "gated", "expanded", "chunks", "pooled", "ids_of",
    "attention_modules", "BATCH_TOKENS", "MAX_PIECES", "MAX_TOTAL_PIECES", "N_STEPS",
    "SCORES", "METHODS", "TAUS",
]
