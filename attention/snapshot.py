"""Public entry point (docs/architecture.md, "Contracts"): load a view's JSON snapshot and
compare it with a recomputation. The code lives in attention/files/snapshot.py."""
from attention.files.snapshot import compare, load

__all__ = ["compare", "load"]
