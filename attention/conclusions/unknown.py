"""How much of a corpus the model cannot read: the share of its word pieces that are the
tokenizer's unknown piece ([UNK]), and the sentence every corpus-level page writes from it.

    count(pieces) -> Unknown      pieces: one row per piece with bool columns special and
                                  unknown (token_importance's frame, the corpus job's pieces)
    sentence(unknown, model, page) -> Conclusion | None     page: "importance" or "corpus"

Word pieces are the pieces the tokenizer did not add: every piece but [CLS], [SEP], [PAD]
and the like, an [UNK] included (it stands for a word of the text). Above THRESHOLD the
sentence leads the page's conclusions: the numbers then describe only the pieces the model
reads, and READER, the bundled model with a byte-level tokenizer, reads every piece.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from attention.config import BUNDLED_LM
from attention.i18n import translate

THRESHOLD = 0.10                  # above this share of unknown pieces, the page leads with it
READER = BUNDLED_LM               # bundled; its byte-level tokenizer has no unknown piece
UNKNOWN_STRINGS = ("[UNK]", "<unk>")   # the piece's usual names, for tables without `unknown`


@dataclass(frozen=True)
class Unknown:
    unknown: int        # word pieces that are the unknown piece
    words: int          # word pieces (the tokenizer's additions left out)

    @property
    def share(self) -> float:
        return self.unknown / self.words if self.words else 0.0

    @property
    def high(self) -> bool:
        return self.share > THRESHOLD


def unknown_column(pieces: pd.DataFrame) -> pd.Series:
    """The table's `unknown` flags, or (a table written before it had them) the pieces named
    like an unknown piece."""
    if "unknown" in pieces:
        return pieces["unknown"].astype(bool)
    return pieces["token"].isin(UNKNOWN_STRINGS)


def count(pieces: pd.DataFrame) -> Unknown:
    unknown = unknown_column(pieces)
    words = ~pieces["special"].astype(bool) | unknown
    return Unknown(int(unknown.sum()), int(words.sum()))


@dataclass(frozen=True)
class Conclusion:
    key: str
    params: tuple

    def text(self, lang: str) -> str:
        return translate(lang, f"unknown.{self.key}", **dict(self.params))


def sentence(found: Unknown, model: str, page: str) -> Conclusion:
    """The share stated for `model`; above THRESHOLD, what the page's numbers then describe
    and which bundled model reads the corpus."""
    params = (("model", model), ("unknown", f"{found.unknown:,}"), ("words", f"{found.words:,}"),
              ("share", f"{100 * found.share:.0f}%"), ("read", f"{found.words - found.unknown:,}"),
              ("reader", READER), ("threshold", f"{100 * THRESHOLD:.0f}%"))
    if not found.high:
        return Conclusion("low", params)
    return Conclusion(f"high_{page}", params)
