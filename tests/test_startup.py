"""Start-up: the first page run of a server process starts the warm-up thread
(attention/ui/warmup.py) and prefetching, whose results the pages then use instead of
recomputing; `streamlit run app.py` is the only way to start."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from attention.models import loading
from attention import models
from attention.models import bert
from attention import diskcache
from attention.experiment import training as ex
from attention.spec import AttentionSpec
from attention.ui import activity, entry, prefetch, warmup
from tests.apptest import ROOT, grid_cells, run_page

# A page script that holds its run open until the test lets it go (test_page_running_...).
RUNNING, RELEASE = threading.Event(), threading.Event()
HELD_PAGE = """
from tests.test_startup import RELEASE, RUNNING
RUNNING.set()
RELEASE.wait(60)
"""


def test_the_first_page_run_starts_the_background_work_once_per_process(monkeypatch):
    started = []
    monkeypatch.setattr(entry, "warm_up", lambda: started.append(threading.current_thread().name))
    monkeypatch.setattr(prefetch, "enable", lambda on=True: None)   # this process's AppTests
    # must not prefetch (tests/conftest.py checks it)
    monkeypatch.setattr(entry, "_started", threading.Event())
    monkeypatch.setenv(entry.WARMUP_ENV, "0")
    assert entry.start_background() is False              # switched off: nothing starts
    monkeypatch.setenv(entry.WARMUP_ENV, "1")
    calls = [entry.start_background() for _ in range(5)]  # five page runs, one process
    assert calls == [True, False, False, False, False]
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started == ["attention-warm-up"]


def test_every_page_script_starts_through_the_entry_module():
    for script in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        text = script.read_text()
        assert "from attention.ui.entry import page_setup" in text, script.name
        assert "attention.ui.layout import start_page" not in text, script.name


def test_a_failing_step_is_skipped_and_the_rest_still_run():
    ran = []

    def broken():
        raise RuntimeError("no model here")

    times = warmup.warm_up((("a", lambda: ran.append("a")), ("bad", broken),
                            ("b", lambda: ran.append("b"))))
    assert ran == ["a", "b"] and set(times) == {"a", "b"}


def test_every_page_module_the_warm_up_imports_exists():
    warmup._pages()          # raises if a module it names was renamed


def test_the_frozen_heap_is_out_of_the_collectors_walk():
    """After the warm-up's freeze, a full collection walks only what was made since: the
    imported libraries' objects (hundreds of thousands) are no longer in any generation. In a
    subprocess: gc.freeze() would hold this test process's objects too."""
    code = ("import gc, torch, pandas, altair\n"
            "from attention.ui import warmup\n"
            "before = len(gc.get_objects()) + gc.get_freeze_count()\n"   # attention.ui froze some
            "warmup._freeze()\n"
            "print(before, gc.get_freeze_count(), len(gc.get_objects()))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    before, frozen, walked = map(int, out.split())
    assert before > 100_000 and frozen >= 0.9 * before
    assert walked < 0.01 * before


def test_sharper_page_uses_what_the_warm_up_stored(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.ENV, str(tmp_path))
    monkeypatch.setattr(ex, "SHARPEN_STEPS", 20)
    monkeypatch.setattr(ex, "SCALING_STEPS", 10)
    monkeypatch.setattr(ex, "EVAL_SIZE", 512)
    warmup._sharper()
    assert len(list(tmp_path.glob("*.zip"))) == 2

    def no_training(*args, **kwargs):
        raise AssertionError("the page trained again")

    monkeypatch.setattr(ex, "sharpening_study", no_training)
    monkeypatch.setattr(ex, "scaling_sweep", no_training)
    at = run_page("pages/4_Is_sharper_better.py", sh_seed="0")
    assert not at.exception
    assert len(at.get("vega_lite_chart")) >= 5          # the toy section's five, then the real models'


def test_deferred_steps_wait_until_no_page_is_running():
    page = threading.Event()
    page.set()                                        # a visitor's page is being drawn
    log = []

    def step(name):
        return name, lambda: log.append((name, page.is_set()))

    steps = (step("imports"), step("analysis"), step("model"), step("sharper"))
    def page_after_imports():
        return page.is_set() and bool(log)            # the visitor arrives during the imports

    thread = threading.Thread(target=warmup.warm_up,
                              args=(steps, {"model", "sharper"}, page_after_imports, 0.2))
    thread.start()
    deadline = time.monotonic() + 10
    while not log and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)                                   # longer than the quiet period
    assert log == [("imports", True)]                 # no step started during the page's run
    page.clear()
    thread.join(10)
    assert log == [("imports", True), ("analysis", False), ("model", False), ("sharper", False)]


class FakeClock:
    """time.monotonic and time.sleep of activity and warmup on a clock that only sleep() moves (a loaded
    machine's late wake-ups cannot change what the warm-up sees)."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def perf_counter(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(activity, "time", fake)
    monkeypatch.setattr(warmup, "time", fake)
    return fake


def test_deferred_steps_wait_for_a_quiet_period_after_the_last_run(clock):
    runs = [True] * 3                                 # a page runs for the first three looks
    log = []

    def busy():
        return runs.pop(0) if runs else False

    def step(name):
        return name, lambda: log.append((name, clock.now))

    warmup.warm_up((step("analysis"), step("model")), {"model"}, busy, quiet=1.0)
    # the run's last look is at 0.10 s: analysis at the first idle look, model 1 s later
    one_poll = activity.POLL * 1.01
    assert log == [("analysis", pytest.approx(0.15, abs=one_poll)),
                   ("model", pytest.approx(1.15, abs=one_poll))]


def test_the_quiet_period_restarts_when_a_page_runs_again(clock):
    looks = iter([False, False, True, False])                      # then False for ever
    assert activity.wait_until_quiet(lambda: next(looks, False), quiet=0.1,
                                   poll=0.04) == pytest.approx(0.08 + 0.12, abs=0.041)
    assert activity.wait_until_quiet(lambda: True, quiet=0.0, limit=0.2,
                                   poll=0.05) == pytest.approx(0.2, abs=0.051)   # gives up


def test_page_running_sees_a_script_run_in_progress():
    RUNNING.clear()
    RELEASE.clear()
    at = AppTest.from_string(HELD_PAGE, default_timeout=60)
    thread = threading.Thread(target=at.run)
    thread.start()
    try:
        assert RUNNING.wait(30)
        assert activity.page_running()
    finally:
        RELEASE.set()
        thread.join(60)
    deadline = time.monotonic() + 10
    while activity.page_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not activity.page_running()


def test_a_model_link_during_the_warm_up_loads_the_model_once(monkeypatch):
    """The page's run loads the model itself (the warm-up's model step waits for it to end),
    draws once, and the warm-up's step then finds the model loaded."""
    loads = []
    real_load = bert.load_bert

    def counting_load(*args, **kwargs):
        loads.append(threading.current_thread().name)
        return real_load(*args, **kwargs)

    loading._bundled.cache_clear()
    monkeypatch.setattr(bert, "load_bert", counting_load)
    times = {}

    def warm():
        deadline = time.monotonic() + 60
        while not activity.page_running() and time.monotonic() < deadline:
            time.sleep(0.01)                          # the link arrived first
        times.update(warmup.warm_up((("model", warmup._model),), quiet=0.2))

    thread = threading.Thread(target=warm)
    thread.start()
    spec = AttentionSpec(tokens=("the", "cat", "sat"), source="pretrained")
    at = run_page("pages/3_Model_heads.py", spec)
    thread.join(120)
    assert not at.exception and not at.error
    assert len(grid_cells(at)[0]) == 6 * 12 * 5 * 5                  # the 72-head grid
    assert "model" in times                           # the warm-up's step ran, and succeeded
    assert loads == [activity.SCRIPT_THREAD]            # once, by the page


def test_the_warm_up_thread_logs_no_missing_context_warning(caplog):
    """A cached lookup from the warm-up thread (no script run) asks for no spinner and says
    nothing about a missing ScriptRunContext."""
    import streamlit as st

    st.cache_resource.clear()                         # empties the store: a miss, computed
    caplog.set_level("WARNING")
    thread = threading.Thread(target=warmup._analysis)
    thread.start()
    thread.join(60)
    assert not [r for r in caplog.records if "ScriptRunContext" in r.getMessage()]
