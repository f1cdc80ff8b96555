"""Every page starts with `entry.page_setup()`, which calls `start_page()` here: page config,
the shared sidebar, the current spec.

Each page script is self-sufficient (Streamlit runs a deep-linked page without app.py on a
fresh server), so the sidebar is drawn here, by every page, the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

import streamlit as st

from attention import config
from attention.errors import UserError
from attention.text.examples import EXAMPLES
from attention.i18n import LANGUAGES
from attention.spec import LIMITS, MAX_MODEL_CHARS, SOURCES, AttentionSpec
from attention.text.tokens import FORMATS
from attention.ui import state
from attention.ui.pages import PAGES
from attention.ui.snapshot import snapshot_box
from attention.ui.text import LANG_KEY, message, t

EXAMPLE_KEY = "in_example"
KEEP = "session"  # sidebar widgets keep their values across page switches
SHARE_KEY = "share_menu"   # the share menu's open state
TOY_PAGES = ("nav.input", "nav.heatmap", "nav.scores")   # the pages that run random projections
TUCKED_KEY = "toy_settings_box"   # their settings' box on the other pages (drawn while open)
TOY_ERRORS = ("errors.spec_range", "errors.spec_cells", "errors.spec_work")   # about them
# Pages with controls of their own for the sidebar's layer, mask and temperature (one owner
# per setting): there the sidebar's are drawn disabled, each page's reason under them.
OWN_SETTINGS = {"nav.model": "model", "nav.importance": "page", "nav.sharper": "page",
                "corpus.nav": "page"}


@dataclass(frozen=True)
class Page:
    spec: AttentionSpec | None  # None when the sidebar's input is invalid
    fmt: str | None             # the token format the sidebar's text was split by
    lang: str
    share_slot: object          # sidebar container: the share menu, the snapshot box

    def view(self, draw: Callable[..., None], *args, **kwargs) -> None:
        """Draw a page section whose view controls (head, zoom, view, row...) rerun only it.

        `draw(*args, **kwargs)` runs inside an st.fragment: a click on one of its widgets
        reruns that function alone, not the sidebar or the page's other sections (the share
        menu makes its link when opened, so it carries the view settings on screen). Pass
        what the section is computed from (a spec), not large results: a fragment keeps its
        arguments for the session's later reruns."""
        _view_section(draw, args, kwargs)

    def finish(self) -> None:
        """The share menu and the snapshot box, drawn last (an open menu's link then holds
        the view settings the page just set); neither for an invalid input."""
        if self.spec is None:
            return
        with self.share_slot:
            _share_menu()
        snapshot_box(self.share_slot, self.spec)


@st.fragment
def _share_menu() -> None:
    """The share menu; open, the link of the URL as it is now (spec, language, view
    settings). Opening it reruns this fragment alone and makes the link from the URL of that
    moment, so a view section's clicks need not redraw it: closed, the sidebar holds one
    button, not a link that every click renders again (README, "Performance")."""
    menu = st.popover(t("sidebar.share"), icon=":material/link:", width="stretch",
                      key=SHARE_KEY, on_change="rerun")
    if menu.open:
        url = f"{st.context.url or ''}?{urlencode(st.query_params.to_dict())}"
        menu.caption(t("sidebar.share_help"))
        menu.code(url, language=None, wrap_lines=True)


@st.fragment
def _view_section(draw: Callable[..., None], args: tuple, kwargs: dict) -> None:
    draw(*args, **kwargs)


# the app's few style rules (a narrow screen's wrapping), read once per process
PAGE_CSS = (Path(__file__).with_name("page.css")).read_text(encoding="utf-8")


def start_page(title_key: str, *, needs_spec: bool = True) -> Page:
    """Configure the page, draw the shared sidebar and return the current spec.

    With needs_spec (the default), invalid input shows its message and stops the page here."""
    state.rename_old_keys()
    url_problems = state.seed_from_url()
    state.keep_across_pages(title_key)
    st.set_page_config(page_title=f"{t(title_key)} · Attention Explorer",
                       page_icon=":material/grid_on:", layout="wide")
    st.html(f"<style>{PAGE_CSS}</style>")
    draft, sidebar_problems = _sidebar(title_key)
    state.sidebar_drawn(title_key)
    share_slot = st.sidebar.container()
    for problem in (*url_problems, *sidebar_problems):
        st.warning(message(problem), icon=":material/link_off:")
    state.write_url(draft.spec)
    st.title(t(title_key))
    error = draft.error or (model_check(draft.spec) if needs_spec else None)
    if error is not None and needs_spec:
        st.error(message(error), icon=":material/error:")
        st.stop()
    return Page(spec=draft.spec, fmt=draft.fmt, lang=st.session_state[LANG_KEY],
                share_slot=share_slot)


def model_check(spec: AttentionSpec) -> UserError | None:
    """A real model that cannot be loaded, a text longer than it reads or a layer it lacks:
    refused here, with its sentence, rather than inside a page's computation (the toy model
    has no such limits)."""
    if spec.source != "pretrained":
        return None
    from attention.ui.model import check

    return check(spec)


def _choose_example() -> None:
    choice = st.session_state[EXAMPLE_KEY]
    if choice in EXAMPLES:
        st.session_state[state.TEXT] = EXAMPLES[choice]
        st.session_state[state.FMT] = "auto"


def _sidebar(title_key: str) -> tuple[state.Draft, list[UserError]]:
    sb = st.sidebar
    sb.selectbox(t("sidebar.language"), list(LANGUAGES), key=LANG_KEY,
                 format_func=LANGUAGES.get, persist_state=KEEP)
    draft_for_links = state.draft_from_widgets()
    for script, key, icon in PAGES:
        sb.page_link(script, label=t(key), icon=icon,
                     query_params=state.link_params(draft_for_links.spec))
    sb.divider()
    sb.radio(t("sidebar.source"), SOURCES, key=state.KEY + "source", horizontal=True, persist_state=KEEP,
             format_func=lambda s: t(f"sidebar.source_{s}"))
    sb.selectbox(t("sidebar.example"), ["", *EXAMPLES], key=EXAMPLE_KEY, on_change=_choose_example,
                 persist_state=KEEP,
                 format_func=lambda e: t(f"examples.{e}") if e else t("sidebar.example_pick"))
    sb.text_area(t("sidebar.tokens"), key=state.TEXT, height=120, help=t("sidebar.tokens_help"),
                 persist_state=KEEP)
    sb.selectbox(t("sidebar.format"), FORMATS, key=state.FMT, persist_state=KEEP,
                 format_func=lambda f: t(f"sidebar.format_{f}"))
    toy = st.session_state[state.KEY + "source"] == "toy"
    problems = []
    if not toy or title_key in TOY_PAGES:   # a real model: its picker (it fixes the sizes);
        with sb.expander(t("sidebar.model_settings"), expanded=True):
            if toy:                         # or the page uses the toy: its settings
                _toy_settings()
            else:
                problems += _model_picker(OWN_SETTINGS.get(title_key))
    else:                           # a page that does not use them: they wait,
        if draft_for_links.error is not None and draft_for_links.error.key in TOY_ERRORS:
            st.session_state[TUCKED_KEY] = True     # open on what the page's error is about
        with sb.expander(t("sidebar.model_settings"), key=TUCKED_KEY,   # closed, undrawn
                         on_change="rerun") as box:
            if box.open:
                st.caption(t("sidebar.toy_unused"))
                _toy_settings()
    owner = OWN_SETTINGS.get(title_key)
    st.sidebar.toggle(t("sidebar.causal"), key=state.KEY + "causal", help=t("sidebar.causal_help"),
                      persist_state=KEEP, disabled=owner is not None)
    lo, hi = LIMITS["temperature"]
    st.sidebar.number_input(t("sidebar.temperature"), min_value=lo, max_value=hi, step=0.1,
                            key=state.KEY + "temperature", help=t("sidebar.temperature_help"),
                            persist_state=KEEP, disabled=owner is not None)
    if owner is not None:
        st.sidebar.caption(t(f"sidebar.unused_{owner}_mask"))
    return state.draft_from_widgets(), problems


def _model_picker(owner: str | None = None) -> list[UserError]:
    """Which real model (the bundled one or a folder / Hub id), its layer slider over the
    layers it has, and the hide-sinks toggle. A model that does not load leaves the slider at
    its widest; start_page then shows why. Returns warnings (a link's layer out of range).
    owner: where the page picks its layers itself (OWN_SETTINGS), the slider is disabled
    with that reason."""
    from attention import models
    from attention.ui.model import ensure_model

    st.selectbox(t("sidebar.model"), state.PICKS, key=state.MODEL_PICK, persist_state=KEEP,
                 format_func=lambda p: t(f"sidebar.model_{p}"))
    if st.session_state[state.MODEL_PICK] == "smollm2":    # its whole name (the box cuts it)
        st.caption(t("sidebar.model_smollm2") if _lm_installed() else
                   t("model.lm_missing", source=config.BUNDLED_LM,
                     install=config.BUNDLED_LM_INSTALL))
    if st.session_state[state.MODEL_PICK] == "own":
        policy = config.policy()
        st.text_input(t("sidebar.model_path"), key=state.MODEL, max_chars=MAX_MODEL_CHARS,
                      help=t("sidebar.model_path_help" if policy.local
                             else "sidebar.model_path_help_shared"), persist_state=KEEP)
        if policy.local:            # your own machine: folders and Hub ids
            downloads = "downloads_on" if policy.downloads else "downloads_off"
            st.caption(t("sidebar.model_caption", downloads=t(f"sidebar.{downloads}"),
                         limit=policy.max_params))
        else:                       # a shared server: what it offers, and nothing of its disk
            st.caption(t("sidebar.model_offered", allowed=", ".join(policy.sources),
                         limit=policy.max_params))
    try:                            # a model still converting: the page shows its progress
        loaded = ensure_model(state.model_choice() or models.BUNDLED, wait=False)
    except UserError:
        loaded = None
    problems, key = [], state.KEY + "layer"
    last = loaded.layers - 1 if loaded is not None else LIMITS["layer"][1]
    if st.session_state.get(key, 0) > last:
        problems.append(UserError("sidebar.model_layer_clamped", layer=st.session_state[key],
                                  last=last, name=loaded.name))
        st.session_state[key] = last
    if last > 0:
        st.slider(t("sidebar.layer"), 0, last, key=key, persist_state=KEEP,
                  help=t("sidebar.layer_help"), disabled=owner is not None)
        if owner is not None:
            st.caption(t(f"sidebar.unused_{owner}_layer"))
    st.toggle(t("sidebar.hide_sinks"), key=state.KEY + "hide_sinks", persist_state=KEEP,
              help=t("sidebar.hide_sinks_help"))
    if loaded is not None:
        st.caption(t("sidebar.pretrained_fixed", name=loaded.name, layers=loaded.layers,
                     heads=loaded.heads, d_head=loaded.d_head, hidden=loaded.hidden))
    return problems


def _lm_installed() -> bool:
    from attention.models import convert

    return convert.packaged_gguf() is not None


def _toy_settings() -> None:
    """The random projections' sizes, seed and positional encoding. Not drawn where they do
    not apply (with a real model, on a page not in TOY_PAGES unless its box is open): their
    values stay in the session (persist_state) and in the spec, and come back with the
    widgets."""
    for name in ("d_model", "d_k", "heads", "seed"):
        lo, hi = LIMITS[name]
        st.number_input(t(f"sidebar.{name}"), min_value=lo, max_value=hi, step=1,
                        key=state.KEY + name, help=t(f"sidebar.{name}_help"), persist_state=KEEP)
    st.toggle(t("sidebar.positional"), key=state.KEY + "positional", persist_state=KEEP,
              help=t("sidebar.positional_help"))

