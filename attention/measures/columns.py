"""The columns of the per-head statistics tables (measures/heads.py computes them), named
where no torch is imported: the Corpus page reads stored tables by these names, and a cold
link to it pays for no torch (docs/architecture.md, "Imports")."""
from __future__ import annotations

HEAD_COLUMNS = ("entropy", "max_weight", "to_cls", "to_sep", "to_punct",
                "to_prev", "to_next", "to_self")
SINK_COLUMNS = ("to_first", "to_special")
