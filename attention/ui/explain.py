"""The collapsible "what am I looking at?" section every page ends with."""
from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from attention.ui.text import t


def explanation(title_key: str, steps: Iterable[tuple[str | None, str | None]]) -> None:
    """Each step is a paragraph (an interface-text key) and/or a formula (LaTeX), in order.

    Drawn only while open (opening it reruns the page): closed, its paragraphs and formulas
    are not on the page, so a click elsewhere does not render them again."""
    with st.expander(t(title_key), icon=":material/school:", key=f"explain_{title_key}",
                     on_change="rerun") as box:
        if not box.open:
            return
        for text_key, formula in steps:
            if text_key:
                st.markdown(t(text_key))
            if formula:
                st.latex(formula)
