"""The interface language of this session and the `t()` lookup pages use for every string."""
from __future__ import annotations

import streamlit as st

from attention.errors import UserError
from attention.i18n import DEFAULT_LANGUAGE, LANGUAGES, translate

LANG_KEY = "lang"


def initial_language() -> str:
    """The URL's ?lang= first, else the browser's locale, else English."""
    wanted = st.query_params.get(LANG_KEY)
    if wanted in LANGUAGES:
        return wanted
    locale = (st.context.locale or "").lower()
    return "zh" if locale.startswith("zh") else DEFAULT_LANGUAGE


def lang() -> str:
    return st.session_state.get(LANG_KEY, DEFAULT_LANGUAGE)


def t(key: str, **values) -> str:
    """Interface text for `key` in the session's language."""
    return translate(lang(), key, **values)


def message(error: UserError) -> str:
    return error.message(lang())
