"""How long a live computation will take, said before it starts, and how long it took, said
after: from rates measured on this server process and kept for its life (every session
shares them), never from a figure written in the code.

    RATES.rate(kind) -> seconds per unit or None      kind: ("importance", model, stage), ...
    RATES.record(kind, seconds, units)                 a finished run's own measurement
    timed(probe) -> (result, seconds)
    before(placeholder, seconds, measured)             "about 40 s (rate measured on ...)"
    after(placeholder, seconds, estimate)              "took 34 s (estimated 40 s)"

A rate is the last run's seconds per unit of work (a piece, a forward pass): the work of one
kind scales with its units, so the next run's estimate is rate x its units. The first run of
a kind in a process has no rate yet: its caller times a small probe of the same work first
(attention.importance.live.probe, the corpus job on one text) and says so.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

import streamlit as st

from attention.ui.text import t

LAST_KEY = "estimate_last"          # session state: {what: (estimate, seconds)} of this session


class Rates:
    """Seconds per unit of work by kind, the last measurement of each (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rates: dict[Hashable, float] = {}

    def rate(self, kind: Hashable) -> float | None:
        with self._lock:
            return self._rates.get(kind)

    def record(self, kind: Hashable, seconds: float, units: float) -> None:
        if units > 0 and seconds >= 0:
            with self._lock:
                self._rates[kind] = seconds / units

    def clear(self) -> None:
        with self._lock:
            self._rates.clear()


RATES = Rates()


def timed(work: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    got = work()
    return got, time.perf_counter() - start


def duration(seconds: float) -> str:
    """A duration as a user reads it: "8 s", "2 min 5 s"."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return t("estimate.seconds", s=seconds)
    return t("estimate.minutes", m=seconds // 60, s=seconds % 60)


def before(where, seconds: float, probed: bool) -> None:
    """The estimate, drawn into `where` (an st.empty) before the work starts. probed: the
    rate comes from this run's probe, not from an earlier run on this server."""
    where.info(t("estimate.before_probe" if probed else "estimate.before",
                 time=duration(seconds)), icon=":material/timer:")


def after(where, what: Hashable, seconds: float, estimate: float) -> None:
    """The actual time beside the estimate, kept in the session so the page shows it again
    while it shows these results."""
    st.session_state.setdefault(LAST_KEY, {})[what] = (estimate, seconds)
    show(where, what)


def show(where, what: Hashable) -> None:
    """The session's last run of `what`, if any: its time beside its estimate."""
    got = st.session_state.get(LAST_KEY, {}).get(what)
    if got is not None:
        estimate, seconds = got
        where.caption(t("estimate.after", time=duration(seconds), estimate=duration(estimate)))
