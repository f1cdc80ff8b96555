"""Interface text in English and Simplified Chinese.

Every string a page shows lives in attention/locales/<lang>/<namespace>.toml and is looked up
as "namespace.key". Both languages must define the same keys (tests/test_i18n.py checks).
"""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

LOCALES = Path(__file__).parent / "locales"
LANGUAGES = {"en": "English", "zh": "简体中文"}
DEFAULT_LANGUAGE = "en"


@lru_cache(maxsize=None)
def catalog(lang: str) -> dict[str, str]:
    """Every "namespace.key" -> text for one language."""
    table = {}
    for path in sorted((LOCALES / lang).glob("*.toml")):
        with path.open("rb") as f:
            for key, text in _flatten(tomllib.load(f)):
                table[f"{path.stem}.{key}"] = text
    return table


def _flatten(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def translate(lang: str, key: str, **values) -> str:
    """The text for `key` in `lang` (English if the language lacks it), formatted with values."""
    lang = lang if lang in LANGUAGES else DEFAULT_LANGUAGE
    text = catalog(lang).get(key) or catalog(DEFAULT_LANGUAGE).get(key)
    if text is None:
        raise KeyError(f"no interface text for {key!r}")
    return text.format(**values) if values else text
