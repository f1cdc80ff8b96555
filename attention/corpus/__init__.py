"""Corpora: many texts read at once, for runs over a whole corpus rather than one input.

sources.py turns a bundled corpus, a file, pasted lines or an upload into a list of texts,
and a file of paraphrase pairs into (sentence, paraphrase) tuples (pairs).
"""
from attention.corpus.sources import (BUNDLED, MAX_TEXT_CHARS, MAX_TEXTS, MAX_UPLOAD_BYTES,
                                      MAX_UPLOAD_TEXTS, digest, from_upload, load, pair_groups, pairs,
                                      pairs_from_upload, parse_lines)

__all__ = ["BUNDLED", "MAX_TEXT_CHARS", "MAX_TEXTS", "MAX_UPLOAD_BYTES", "MAX_UPLOAD_TEXTS",
           "digest", "from_upload", "load", "pair_groups", "pairs", "pairs_from_upload",
           "parse_lines"]
