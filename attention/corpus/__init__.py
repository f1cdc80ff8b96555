"""The corpus job: one model run over many texts, written as Parquet shards and a manifest
(job.py, engines.py, shards.py, compute.py), and the tables read back from them (store.py,
qkmap.py). `python -m attention.corpus run ...` starts it (docs/corpus.md).

The corpora themselves (bundled texts, files, uploads) are read by attention.text.corpora,
below both this job and the importance measures; `load` and `pairs` (the paraphrase pairs of
a source) stay importable from here.
"""
from attention.text.corpora import BUNDLED, load, pairs

__all__ = ["BUNDLED", "load", "pairs"]
