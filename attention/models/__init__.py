"""Real models with `core.attention` running inside their forward pass.

    load_model(source) -> LoadedModel        # the bundled MiniLM or SmolLM2, a local folder,
                                             # a .gguf file or a Hub id
    LoadedModel.run(text, interventions=()) -> ModelRun

The modules, in the order data flows through them:
    interventions  what an intervention changes (unscaled, temperature, ablate, uniform, hide_sinks)
    registered     the attention function every layer calls (transformers' AttentionInterface)
    capture        one forward pass with its q, k, v and weights captured (ModelRun)
    loaded         LoadedModel: a model, its tokenizer and its shape
    loading        load_model under attention.config's policy, and the one model store
                   (cap, eviction, memory reservation); bert: the bundled model in torch
    describe       a loaded model measured by a probe forward (heads, head size, causality)
    convert        a GGUF file converted once to float32 safetensors (python -m attention.models)
    gguf_source    the bundled SmolLM2 and .gguf files: converted now, or in the background
    runs           a model's runs as the pages use them (kept in one byte budget)
    outcomes       what an intervention changes at the output; links: interventions in a URL
    toy            the toy model of pasted tokens (hashed embeddings, seeded projections)
"""
from attention.config import BUNDLED, BUNDLED_LM
from attention.models.capture import ModelRun
from attention.models.interventions import KINDS, Intervention
from attention.models.loaded import LoadedModel
from attention.models.loading import bundled_path, is_kept, load_model

__all__ = ["BUNDLED", "BUNDLED_LM", "KINDS", "Intervention", "LoadedModel", "ModelRun", "bundled_path",
           "is_kept", "load_model"]
