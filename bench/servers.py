"""The servers the browser benchmarks start (bench/browser_heatmap.py, cold_link.py,
renders.py, memory.py, pretrained.py), and the baseline pages they serve.

    server(script=None, warmup=True)  `streamlit run app.py` (or `script`) on a free port
                                      (tests.conftest.Server), ATTENTION_EXPLORER_WARMUP as asked
    BARE, BASELINE                    the bare page: a title, one picker, one small chart; the
                                      one-rect-per-cell altair heatmap (bench/browser_heatmap.py)
    Servers(), servers()              the app's and those pages' servers, started when first
                                      asked for and stopped together
    shared_servers()                  one set for a whole `python -m bench --quick`
    tree_rss(pid), Sampler(pid)       resident bytes of a server and its children; their peak
"""
from __future__ import annotations

import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP_ENV = "ATTENTION_EXPLORER_WARMUP"
SAMPLE = 0.2                    # s between RSS samples (Sampler)

# A bare page: a title, one picker and one small chart the picker changes. The picker is a
# selectbox (a cold link's page, a head or layer click); ?w=buttons makes it a segmented
# control (a view change), ?w=steps a number input (a row step): each click of the app is
# held to the same kind of click here (bench/browser_heatmap.same_click). ?r=canvas draws the
# chart on a canvas (Vega's canvas renderer, as Streamlit itself picks for big charts), so a
# click can be timed to the canvas's last draw call, as the app's canvas heatmap is.
BARE = '''
import altair as alt, pandas as pd, streamlit as st
st.title("bare")
kind = st.query_params.get("w", "select")
if kind == "buttons":
    views = ["Scaled vs unscaled", "All heads", "Follow one query"]
    head = views.index(st.segmented_control("View", views, default=views[0], required=True))
elif kind == "steps":
    head = st.number_input("Query position", min_value=0, max_value=2047, value=0, step=1)
else:
    head = st.selectbox("Head", list(range(4)), format_func=lambda h: f"Head {h}")
chart = (alt.Chart(pd.DataFrame({"x": list("abcdefghij"), "y": [head + i for i in range(10)]}))
         .mark_bar().encode(x="x:N", y="y:Q"))
if st.query_params.get("r") == "canvas":
    chart = chart.properties(usermeta={"embedOptions": {"renderer": "canvas"}})
st.altair_chart(chart)
'''

# The one-rect-per-cell altair heatmap at n (?n=, 256 by default; docs/decisions.md, "Long
# inputs"), or with ?v=bare one small bar chart: bench/browser_heatmap.py's first-paint baselines.
BASELINE = '''
import altair as alt, numpy as np, pandas as pd, streamlit as st
n = int(st.query_params.get("n", 256))
st.title("baseline")
if st.query_params.get("v") == "bare":
    st.altair_chart(alt.Chart(pd.DataFrame({"x": list("abcdefghij"), "y": range(10)}))
                    .mark_bar().encode(x="x:N", y="y:Q"))
else:
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    w = np.random.default_rng(0).random((n, n))
    frame = pd.DataFrame({"query": q.ravel(), "key": k.ravel(), "weight": w.ravel()})
    st.altair_chart(alt.Chart(frame).mark_rect().encode(
        x="key:O", y="query:O", color="weight:Q", tooltip=["query", "key", "weight"]))
'''
SCRIPTS = {"bare": BARE, "baseline": BASELINE}


def server(script: str | None = None, cwd=ROOT, warmup: bool = True,
           env: dict[str, str] | None = None):
    """`streamlit run app.py` (or `script`) as a user starts it; warmup=False is the app with
    ATTENTION_EXPLORER_WARMUP=0 (no warm-up thread, no prefetching: what `streamlit run
    app.py` was before the pages started them); `env`: more environment variables."""
    from tests.conftest import Server

    return Server(script, cwd=cwd, env={WARMUP_ENV: "1" if warmup else "0", **(env or {})})


class Servers:
    """Servers started when first asked for and stopped together: "app" (warm-up on),
    "app_off" (ATTENTION_EXPLORER_WARMUP=0), and the SCRIPTS pages "bare" and "baseline".
    app_dir: the app of another checkout."""

    def __init__(self, app_dir: str | None = None) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.app_dir, self.started = app_dir, {}
        self.results: dict = {}   # what modules measured on these servers, to share (quick runs)

    def _start(self, name: str):
        if name in SCRIPTS:
            path = Path(self.tmp.name) / f"{name}.py"
            path.write_text(SCRIPTS[name])
            return server(str(path))
        return server(warmup=name != "app_off", **({"cwd": self.app_dir} if self.app_dir else {}))

    def start(self, *names: str) -> None:
        """Start those not yet running side by side (each start mostly waits on its process)."""
        todo = [name for name in dict.fromkeys(names) if name not in self.started]
        with ThreadPoolExecutor(max(1, len(todo))) as pool:
            self.started.update(zip(todo, pool.map(self._start, todo)))

    def __getitem__(self, name: str):
        self.start(name)
        return self.started[name]

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.started.values():
            srv.stop()
        self.tmp.cleanup()


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (VmRSS from /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) * 1024 for line in f
                              if line.startswith("VmRSS:"))
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration):
            continue
    return total


class Sampler(threading.Thread):
    """RSS of the server tree every SAMPLE s until stopped; keeps the peak."""

    def __init__(self, pid: int, every: float = SAMPLE) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.stop_event = pid, every, threading.Event()
        self.peak = self.samples = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self.samples += 1
            self.stop_event.wait(self.every)


_shared: Servers | None = None


@contextmanager
def shared_servers():
    """One set of Servers for every module run inside (`python -m bench --quick`): a server,
    and the imports of the app's first run, are paid once, not once per module."""
    global _shared
    with Servers() as srv:
        _shared = srv
        try:
            yield srv
        finally:
            _shared = None


def servers(app_dir: str | None = None):
    """A context giving the shared Servers if a shared_servers() is open (left running: its
    owner stops them), else a set of the caller's own, stopped when the context ends."""
    return nullcontext(_shared) if _shared is not None and app_dir is None else Servers(app_dir)
