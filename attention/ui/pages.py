"""The one list of the app's pages, read by the sidebar, the Input page's links, the tests and
the benchmarks.

The app runs in Streamlit's classic multipage mode: `app.py` is the Input page and each file
of `pages/` is a page, whose URL path Streamlit makes from the file name (`pages/1_Heatmap.py`
is `/Heatmap`). A deep link to a freshly started server then always opens its own page (with
`st.navigation` it would run the page script alone until the root was opened once: the trap
in docs/decisions.md, "Pages"). tests/test_pages.py holds `pages/` to exactly this list, and
every URL path to what Streamlit derives, so old links keep opening the same view.

No Streamlit here: a benchmark or a test reads the list without starting a page.
"""
from __future__ import annotations

import re
from typing import NamedTuple

_NUMBERED = re.compile(r"[0-9]*[_ -]*(.*)\.py")   # Streamlit's page file name: "1_Heatmap.py"


class PageEntry(NamedTuple):
    script: str   # the file Streamlit runs, relative to the app's root
    title: str    # interface-text key of its title (attention/locales/*/nav.toml ...)
    icon: str     # the sidebar link's icon

    @property
    def url_path(self) -> str:
        """The path of the page's URL ("" for app.py, "Heatmap" for pages/1_Heatmap.py)."""
        if "/" not in self.script:
            return ""
        name = self.script.rsplit("/", 1)[1]
        return re.sub(r"[_ ]+", "_", _NUMBERED.fullmatch(name).group(1)).strip()


PAGES = (
    PageEntry("app.py", "nav.input", ":material/edit_note:"),
    PageEntry("pages/1_Heatmap.py", "nav.heatmap", ":material/grid_on:"),
    PageEntry("pages/2_Score_analysis.py", "nav.scores", ":material/query_stats:"),
    PageEntry("pages/3_Model_heads.py", "nav.model", ":material/hub:"),
    PageEntry("pages/4_Is_sharper_better.py", "nav.sharper", ":material/science:"),
    PageEntry("pages/5_Does_the_model_use_it.py", "nav.importance", ":material/troubleshoot:"),
    PageEntry("pages/6_Corpus.py", "corpus.nav", ":material/scatter_plot:"),
)
SCRIPTS = tuple(entry.script for entry in PAGES)


def by_title(key: str) -> PageEntry:
    """The page whose title is the interface-text key `key` (KeyError if none)."""
    for entry in PAGES:
        if entry.title == key:
            return entry
    raise KeyError(key)


def url_path(key: str) -> str:
    """The URL path of the page titled by the interface-text key `key` ("Heatmap" for
    "nav.heatmap", "" for the Input page): benchmarks and tests build links with it."""
    return by_title(key).url_path
