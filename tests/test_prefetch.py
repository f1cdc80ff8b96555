"""attention/ui/prefetch.py: guesses run in the background once the pages rest, never twice,
never behind a visitor, and only when the server turned them on."""
import threading
import time

import pytest

from attention.ui import prefetch


@pytest.fixture
def enabled():
    prefetch.enable()
    yield
    prefetch.drain()
    prefetch.enable(False)


def test_nothing_is_queued_unless_the_server_turned_prefetching_on():
    prefetch.enable(False)
    ran = []
    assert prefetch.prefetch("k-off", lambda: ran.append(1), busy=lambda: False) is False
    time.sleep(0.1)
    assert ran == []


def test_a_job_runs_once_the_pages_are_quiet_and_a_key_is_queued_once(enabled):
    gate = threading.Event()
    ran = []
    busy = lambda: not gate.is_set()                      # noqa: E731  a page "runs" until set
    assert prefetch.prefetch("k1", lambda: ran.append("k1"), busy=busy) is True
    assert prefetch.prefetch("k1", lambda: ran.append("again"), busy=busy) is False  # queued
    time.sleep(prefetch.QUIET * 2)
    assert ran == []                                      # a page is running: it waits
    gate.set()
    prefetch.drain()
    assert ran == ["k1"]
    assert prefetch.prefetch("k1", lambda: ran.append("k1"), busy=lambda: False) is True  # done


def test_a_full_queue_drops_the_guess_and_a_failing_one_is_only_logged(enabled, monkeypatch):
    started, hold = threading.Event(), threading.Event()
    monkeypatch.setattr(prefetch, "QUIET", 0.0)
    prefetch.prefetch("block", lambda: started.set() or hold.wait(),  # occupies the worker
                      busy=lambda: False)
    assert started.wait(10)                       # the worker holds it: the queue is empty
    queued = [prefetch.prefetch(f"q{i}", lambda: None, busy=lambda: False)
              for i in range(prefetch.JOBS + 2)]
    assert queued.count(True) == prefetch.JOBS and queued[-1] is False
    prefetch.prefetch("fails", lambda: 1 / 0, busy=lambda: False)   # the queue is full: dropped
    hold.set()
    prefetch.drain()
    assert prefetch.prefetch("after", lambda: 1 / 0, busy=lambda: False) is True
    prefetch.drain()                                                  # the worker survived
    ran = []
    assert prefetch.prefetch("last", lambda: ran.append(1), busy=lambda: False)
    prefetch.drain()
    assert ran == [1]


def test_a_heatmap_overview_queues_its_neighbour_heads_into_the_page_cache(enabled):
    from attention.analysis import analyze
    from attention.spec import AttentionSpec
    from attention.ui import cache
    from attention.ui.views import heatmap as heatmap_view

    spec = AttentionSpec(tokens=tuple(f"p{i}" for i in range(300)), heads=4, seed=21)
    a = analyze(spec)
    key = lambda h: ("images", a.digest, (h,), heatmap_view.OVERVIEW_BLOCKS, "max", True,  # noqa
                     heatmap_view.charts.VALUES)
    assert not any(key(h) in cache.store() for h in range(4))
    heatmap_view.prefetch_overviews(a, 2, "max", True)
    prefetch.drain()
    assert [key(h) in cache.store() for h in range(4)] == [True, True, False, True]
