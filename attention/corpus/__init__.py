"""Corpora: many texts read at once, for runs over a whole corpus rather than one input.

sources.py turns a bundled corpus, a file, pasted lines or an upload into a list of texts.
"""
from attention.corpus.sources import (BUNDLED, MAX_TEXT_CHARS, MAX_TEXTS, MAX_UPLOAD_BYTES, MAX_UPLOAD_TEXTS,
                                      digest, from_upload, load, parse_lines)

__all__ = ["BUNDLED", "MAX_TEXT_CHARS", "MAX_TEXTS", "MAX_UPLOAD_BYTES", "MAX_UPLOAD_TEXTS",
           "digest", "from_upload", "load", "parse_lines"]
