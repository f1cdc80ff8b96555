"""The spec of the current view: seeded from the URL, edited in the sidebar, written back.

Flow on every run: if this session has no sidebar state yet (a fresh tab, a shared link, a
page reached by a link), the widgets are filled from the URL's spec; otherwise the widgets
are the truth. The resulting spec is written back to the URL, so the address bar is always
the share link of what is on screen.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

import streamlit as st

from attention.config import BUNDLED_LM
from attention.errors import UserError
from attention.text.examples import DEFAULT_TEXT
from attention.spec import OPTIONAL, AttentionSpec
from attention.text.tokens import (CONTROL, FORMATS, TokenError, parse, parse_tokens, tokens_from_link,
                              tokens_to_text)
from attention.ui.text import LANG_KEY, initial_language

KEY = "in_"            # prefix of every sidebar widget key
TEXT, FMT = KEY + "text", KEY + "fmt"
MODEL, MODEL_PICK = KEY + "model", KEY + "model_pick"   # folder/Hub id box; one of PICKS
PICKS = ("bundled", "smollm2", "own")   # MiniLM, the bundled causal LM, a folder / Hub id
PAGE = "page_shown"    # the page this session last ran (see keep_across_pages)
INPUTS = ("tokens", "text")   # the spec's fields that come from the token box
SPEC_FIELDS = [f.name for f in fields(AttentionSpec) if f.name not in INPUTS]


@dataclass(frozen=True)
class Draft:
    """What the sidebar holds: a valid spec, or the reason there is none."""
    spec: AttentionSpec | None
    error: UserError | None
    fmt: str | None = None   # the format the token box was split by (what "auto" detected)


def seed_from_url() -> tuple[UserError, ...]:
    """Fill the sidebar's widget state from the URL once per session (and per page reached
    without it). Returns the URL parameters that were ignored, for a warning.

    A link without an input, opened in an interface language that has its own default
    sentence (Chinese), starts on that sentence, as a reader of that language would type it."""
    if TEXT in st.session_state:
        return ()
    if LANG_KEY not in st.session_state:
        st.session_state[LANG_KEY] = initial_language()
    params = st.query_params.to_dict()
    spec, problems = AttentionSpec.parse_query(params)
    load_spec(spec, typed=params.get("text") or params.get("tokens"))
    typed = DEFAULT_TEXT.get(st.session_state[LANG_KEY])
    if typed and not any(name in params for name in INPUTS):
        st.session_state[TEXT], st.session_state[FMT] = typed, "auto"
    return tuple(problems)


def keep_across_pages(page: str) -> None:
    """Re-assert the sidebar's values on the first run of each page reached in a session.

    Streamlit 1.67 mounts a persist_state="session" widget at its default on the first page
    switch when its value came from st.session_state (a sidebar seeded from a shared link)
    rather than from the user: a deep link followed by a click on another page showed an
    empty token box. Writing the values back before the widgets are drawn makes them stick.
    Call sidebar_drawn(page) once the widgets are out: until then (a run interrupted before
    it got there) every run of the page writes them back again."""
    if st.session_state.get(PAGE) != page:
        for key in (LANG_KEY, TEXT, FMT, MODEL_PICK, *(KEY + name for name in SPEC_FIELDS)):
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]


def sidebar_drawn(page: str) -> None:
    st.session_state[PAGE] = page


def load_spec(spec: AttentionSpec, typed: str | None = None) -> None:
    """Put a spec into the sidebar widgets (from a callback, before they are drawn); `typed`,
    a link's text as typed, goes into the token box when it gives the spec's tokens."""
    st.session_state[TEXT], st.session_state[FMT] = box_for(spec, typed)
    for name in SPEC_FIELDS:
        st.session_state[KEY + name] = getattr(spec, name)
    st.session_state[MODEL_PICK] = ("bundled" if not spec.model else "smollm2"
                                    if spec.model == BUNDLED_LM else "own")


def box_for(spec: AttentionSpec, typed: str | None = None) -> tuple[str, str]:
    """Token box text and format that give back this spec's tokens and text exactly: the text
    as typed (the spec's, else `typed`) under the first format that splits it into the tokens
    (a hand-made link whose tokens no format gives: the spec's text still, which is all a
    model reads), or the tokens."""
    for text in dict.fromkeys(filter(None, (spec.text, typed))):
        for fmt in FORMATS:
            try:
                if fmt != "json" and parse_tokens(text, fmt) == list(spec.tokens):
                    return text, fmt
            except TokenError:
                continue
    if spec.text:
        return spec.text, "auto"
    return tokens_to_text(spec.tokens), "auto"


def draft_from_widgets() -> Draft:
    """The spec the sidebar's widgets describe, validated. A model source also gets the text
    as typed (punctuation and spacing kept), unless it is a JSON list of tokens."""
    typed = st.session_state[TEXT]
    try:
        tokens, fmt = parse(typed, st.session_state[FMT])
        values = {name: st.session_state[KEY + name] for name in SPEC_FIELDS if name != "model"}
        values["model"] = model_choice()
        spec = AttentionSpec(tokens=tuple(tokens), text="" if fmt == "json" else typed, **values)
        spec.validate()
    except UserError as err:
        return Draft(spec=None, error=err)
    return Draft(spec=spec, error=None, fmt=fmt)


def model_choice() -> str:
    """The model the sidebar names: "" (the bundled MiniLM), the bundled causal LM's name or
    the typed folder path / Hub id."""
    pick = st.session_state.get(MODEL_PICK)
    if pick == "smollm2":
        return BUNDLED_LM
    if pick != "own":
        return ""
    return str(st.session_state.get(MODEL, "")).strip()


def write_url(spec: AttentionSpec | None, **view: object) -> None:
    """Put the spec, the language and any page view settings into the address bar. An empty
    token box takes the old input out of it (a reload then opens the default example)."""
    params = link_query(spec)
    params[LANG_KEY] = st.session_state.get(LANG_KEY, "en")
    params.update({k: str(v) for k, v in view.items()})
    if params != st.query_params.to_dict():
        st.query_params.update(params)
    gone = OPTIONAL if spec is not None else INPUTS if not box_text() else ()
    for name in gone:          # a field a link carries only when set (text, model, hide_sinks)
        if name not in params and name in st.query_params:
            del st.query_params[name]


def link_params(spec: AttentionSpec | None) -> dict[str, str]:
    """What a link to another page carries so that page opens on the same view."""
    params = link_query(spec)
    params[LANG_KEY] = st.session_state.get(LANG_KEY, "en")
    return params


def box_text() -> str:
    return CONTROL.sub("", str(st.session_state.get(TEXT) or "")).strip()


def link_query(spec: AttentionSpec | None) -> dict[str, str]:
    """The spec's query, its input as the token box holds it: a link keeps the text as typed
    (a Chinese sentence, not its words joined by spaces). A real model's spec carries its text
    itself; for the toy source the box's text is the `tokens` value when a link reads it back
    into the same tokens (tokens.tokens_from_link), else a `text` beside them, which only the
    box reads (seed_from_url)."""
    if spec is None:
        return {}
    query = dict(spec.to_query())
    typed = box_text()
    if spec.source != "toy" or not typed or typed == query["tokens"] or typed.startswith("["):
        return query
    try:
        if tokens_from_link(typed) == list(spec.tokens):
            query["tokens"] = typed
        elif parse_tokens(typed, st.session_state.get(FMT, "auto")) == list(spec.tokens):
            query["text"] = typed
    except TokenError:
        pass
    return query


# Page view settings live in the URL as <section>_<name>, one prefix per page (a part of its
# own for uploads): hm Heatmap, sc Score analysis, mh Model heads, up its upload part, sh Is
# sharper better?, imp Does the model use it?, cp Corpus. Spec fields and `lang` carry no
# prefix. The names links used before that scheme, read when the new name is absent
# (rename_old_keys):
RENAMED = {"mlayer": "mh_layer", "mhead": "mh_head", "mstat": "mh_stat", "iv": "mh_iv",
           "ivpos": "mh_ivpos", "head": "sc_head", "train_seed": "sh_seed"}


def rename_old_keys() -> None:
    """A link made before the scheme opens the same view: each old name's value moves to its
    new name (unless the link has that too) and the address bar then shows only the new one."""
    for old, new in RENAMED.items():
        if old in st.query_params:
            value = st.query_params[old]
            del st.query_params[old]
            if new not in st.query_params:
                st.query_params[new] = value


def flag(raw: str) -> bool:
    """A toggle's value as view_widget writes it into the URL ("True" / "False")."""
    if raw not in ("True", "False"):
        raise ValueError(raw)
    return raw == "True"


def view_value(name: str, default, cast, valid=lambda value: True):
    """A page's own view setting (head, zoom, ...) from the URL; default if malformed."""
    raw = st.query_params.get(name)
    if raw is None:
        return default
    try:
        value = cast(raw)
    except (TypeError, ValueError, OverflowError):
        return default
    return value if valid(value) else default


def view_widget(name: str, widget, *, default, cast=int, valid=lambda value: True, **kwargs):
    """A page's view control (head picker, zoom...) whose value lives in the URL as `name`.

    `widget` is a Streamlit input such as st.selectbox; kwargs go to it. A stored value that
    is no longer valid (fewer heads than before, say) falls back to the default."""
    view_state(name, default=default, cast=cast, valid=valid)
    return _keep_in_url(name, widget(key="view_" + name, **kwargs))


def part_picker(name: str, parts: tuple[str, ...], *, default: str, label: str,
                names: Callable[[str], str]) -> str:
    """Which of a page's parts is open, kept in the URL as ?<name>=<part>: a row of buttons
    (named by `names`), not st.tabs (a tab bar re-rendered on every commit of a click in the
    part cost 15 % of it), and the page draws only the open part."""
    return view_widget(name, st.segmented_control, default=default, cast=str,
                       valid=parts.__contains__, label=label, label_visibility="collapsed",
                       options=parts, required=True, format_func=names)


def view_state(name: str, *, default, cast=int, valid=lambda value: True):
    """The value of the view control `name` (see view_widget) in a run that does not draw it
    (yet): read before a chart that needs it, or while it waits inside a closed menu. The
    session's value (set by the widget, or by an event such as a box dragged on a chart), else
    the URL's, else the default; kept in the URL."""
    key = "view_" + name
    if key not in st.session_state or not valid(st.session_state[key]):
        st.session_state[key] = view_value(name, default, cast, valid)
    return _keep_in_url(name, st.session_state[key])


def menu_setting(menu, name: str, widget, *, default, cast=int, valid=lambda value: True,
                 **kwargs):
    """A view control kept in a lazy menu (a keyed st.popover): its widget, drawn in the menu,
    while the menu is open; else its value as view_state keeps it."""
    if not menu.open:
        return view_state(name, default=default, cast=cast, valid=valid)
    with menu:
        return view_widget(name, widget, default=default, cast=cast, valid=valid, **kwargs)


def _keep_in_url(name: str, value):
    if st.query_params.get(name) != str(value):   # each write sends the browser the whole URL
        st.query_params[name] = str(value)
    return value


def view_expander(name: str, label: str, **kwargs):
    """A collapsed box whose being open lives in the URL as `name` ("True" / "False"), so a
    shared link reopens it as it was (a malformed value: closed). Opening or closing it reruns
    the page; draw its content only while `.open` (closed, the page pays nothing for it)."""
    key = "view_" + name
    if not isinstance(st.session_state.get(key), bool):
        st.session_state[key] = view_value(name, False, flag)
    box = st.expander(label, key=key, on_change="rerun", **kwargs)
    _keep_in_url(name, bool(box.open))
    return box
