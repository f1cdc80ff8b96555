"""Real models with `core.attention` running inside their forward pass.

    load_model(source) -> LoadedModel        # the bundled MiniLM, a local folder or a Hub id
    LoadedModel.run(text, interventions=()) -> ModelRun

The modules, in the order data flows through them:
    interventions  what an intervention changes (unscaled, temperature, ablate, uniform, hide_sinks)
    registered     the attention function every layer calls (transformers' AttentionInterface)
    capture        one forward pass with its q, k, v and weights captured (ModelRun)
    loaded         LoadedModel: a model, its tokenizer and its shape
    loading        load_model under attention.config's policy; bert: the bundled model in torch
    runs           a model's runs as the pages use them (kept in one byte budget)
    outcomes       what an intervention changes at the output; links: interventions in a URL
    toy            the toy model of pasted tokens (hashed embeddings, seeded projections)
"""
from attention.config import BUNDLED
from attention.models.capture import ModelRun
from attention.models.interventions import KINDS, Intervention
from attention.models.loaded import LoadedModel
from attention.models.loading import bundled_path, load_model

__all__ = ["BUNDLED", "KINDS", "Intervention", "LoadedModel", "ModelRun", "bundled_path",
           "load_model"]
