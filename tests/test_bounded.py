"""The server's bounds: a cache bounded by bytes, and a gate on heavy computations
(attention/bounded.py), and the waiting notice the pages show (attention/ui/cache.py).

No wall-clock assertions: threads are sequenced with events, and every wait has a generous
timeout only so that a broken gate fails instead of hanging."""
from __future__ import annotations

import threading

import pytest
import torch

from attention.analysis import analyze
from attention.bounded import ByteLRU, Gate, nbytes
from attention.spec import AttentionSpec
from attention.ui import cache

WAIT = 60  # s: only a bound on a hang, never asserted


def test_nbytes_counts_storages_once_and_walks_containers():
    t = torch.zeros(1000)                                   # 4000 bytes
    assert nbytes(t) == 4000
    assert nbytes({"a": t, "b": t[10:20], "c": [t]}) == 4000 + 1 + 1 + 1   # one storage; keys
    assert nbytes((b"xy", "abc")) == 5
    a = analyze(AttentionSpec(tokens=tuple(f"w{i}" for i in range(128)), heads=4, d_k=8,
                              d_model=16))
    expected = sum(x.numel() * x.element_size() for x in (a.q, a.k, a.v))
    metrics = 2 * len(a.scaled_metrics) * a.heads * a.n * 4
    assert expected + metrics <= nbytes(a) <= expected + metrics + 10_000


def test_byte_lru_keeps_its_values_within_the_budget_dropping_the_least_recent():
    lru = ByteLRU(100, sizeof=len)
    lru.put("a", b"a" * 40)
    lru.put("b", b"b" * 40)
    assert lru.get_or_compute("a", lambda: pytest.fail("a is kept")) == b"a" * 40  # a: recent
    lru.put("c", b"c" * 40)                                # 120 > 100: b, the least recent, goes
    assert "b" not in lru and "a" in lru and "c" in lru and lru.total == 80
    lru.put("big", b"x" * 101)                             # larger than the budget: not kept
    assert "big" not in lru and lru.total == 80
    lru.put("a", b"a" * 10)                                # replacing an entry re-counts it
    assert lru.total == 50
    for i in range(50):                                    # whatever comes in, the bound holds
        lru.put(i, b"z" * (i % 37))
        assert lru.total <= 100 and lru.total == sum(len(lru.get_or_compute(k, bytes))
                                                     for k in lru.keys())


def test_byte_lru_computes_a_key_once_for_concurrent_callers():
    lru, calls, inside, go = ByteLRU(10**6), [], threading.Event(), threading.Event()

    def slow():
        calls.append(1)
        inside.set()
        go.wait(WAIT)
        return "value"

    results = []
    first = threading.Thread(target=lambda: results.append(lru.get_or_compute("k", slow)))
    first.start()
    assert inside.wait(WAIT)
    second = threading.Thread(target=lambda: results.append(lru.get_or_compute("k", slow)))
    second.start()
    go.set()
    first.join(WAIT)
    second.join(WAIT)
    assert results == ["value", "value"] and calls == [1]


def test_a_failed_computation_is_not_kept():
    lru = ByteLRU(10**6)
    with pytest.raises(ValueError):
        lru.get_or_compute("k", lambda: (_ for _ in ()).throw(ValueError("bad input")))
    assert "k" not in lru and lru.get_or_compute("k", lambda: "ok") == "ok"


def _hold(gate: Gate, release: threading.Event, entered: threading.Event, on_wait=None):
    def body():
        with gate.slot(on_wait):
            entered.set()
            release.wait(WAIT)
    thread = threading.Thread(target=body)
    thread.start()
    return thread


def until(condition) -> None:
    """Poll until condition() holds (WAIT bounds a hang; no time is asserted)."""
    done = threading.Event()
    for _ in range(WAIT * 100):
        if condition():
            return
        done.wait(0.01)
    pytest.fail("condition never held")


def test_gate_lets_slots_run_and_tells_waiters_how_many_are_ahead():
    gate, release = Gate(2), threading.Event()
    holders = [_hold(gate, release, threading.Event()) for _ in range(2)]
    until(lambda: gate.running == 2)                        # both slots taken
    told, third_in = [], threading.Event()
    third = _hold(gate, release, third_in, on_wait=told.append)
    until(lambda: told == [2])                              # 2 running ahead of it
    fourth = _hold(gate, release, threading.Event(), on_wait=told.append)
    until(lambda: told == [2, 3])                           # 2 running + 1 waiting
    assert not third_in.is_set() and gate.running == 2 and gate.waiting == 2
    release.set()
    for t in (*holders, third, fourth):
        t.join(WAIT)
    assert third_in.is_set() and gate.running == 0 and gate.waiting == 0


def test_a_thread_holding_a_slot_re_enters_it():
    gate = Gate(1)
    with gate.slot(lambda n: pytest.fail("waited on itself")):
        with gate.slot(lambda n: pytest.fail("waited on itself")):
            assert gate.running == 1
    assert gate.running == 0


class _Page:
    """Stands in for streamlit: records what the waiting notice shows and clears."""

    def __init__(self):
        self.shown, self.cleared = [], 0

    def empty(self):
        page = self

        class Slot:
            def info(self, text, icon=None):
                page.shown.append(text)

            def empty(self):
                page.cleared += 1
        return Slot()


def test_a_view_that_waits_for_the_gate_shows_the_waiting_notice(monkeypatch):
    page = _Page()
    monkeypatch.setattr(cache, "st", page)
    monkeypatch.setattr(cache, "get_script_run_ctx", lambda: object())
    monkeypatch.setattr(cache, "t", lambda key, **kw: f"{key}:{kw['n']}")
    gate = Gate(1)
    monkeypatch.setattr(cache, "gate", lambda: gate)
    release, busy = threading.Event(), threading.Event()
    holder = _hold(gate, release, busy)
    assert busy.wait(WAIT)
    done = []
    waiter = threading.Thread(target=lambda: done.append(cache.heavy(lambda: "result")))
    waiter.start()
    until(lambda: page.shown)
    assert page.shown == ["common.waiting:1"] and not done   # waiting, and told for how many
    release.set()
    holder.join(WAIT)
    waiter.join(WAIT)
    assert done == ["result"] and page.cleared == 1           # the notice goes when it runs


def test_no_notice_when_a_slot_is_free(monkeypatch):
    monkeypatch.setattr(cache, "st", None)                   # any streamlit call would fail
    assert cache.heavy(lambda: 42) == 42


HEAPS = r"""
import ctypes, ctypes.util, sys, threading
sys.path.insert(0, sys.argv[1])
from attention.bounded import return_freed_memory
assert return_freed_memory(arenas=int(sys.argv[2]))
libc = ctypes.CDLL(ctypes.util.find_library("c"))
barrier = threading.Barrier(9)
def work():
    kept = [bytearray(512) for _ in range(2000)]        # small blocks: from the thread's heap
    barrier.wait()
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
barrier.wait()
libc.open_memstream.restype = ctypes.c_void_p
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(buf.value.decode().count("<heap nr="))
barrier.wait()
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's malloc")
def test_a_busy_server_keeps_few_malloc_heaps():
    """Eight threads allocating at once (a server's script threads, one per session) share
    ARENAS heaps once return_freed_memory ran, counted by glibc's own malloc_info; with a
    cap of 64 they take one heap each (the check can fail)."""
    import subprocess
    import sys
    from pathlib import Path

    from attention.bounded import ARENAS

    root = str(Path(__file__).resolve().parent.parent)

    def heaps(arenas: int) -> int:
        out = subprocess.run([sys.executable, "-c", HEAPS, root, str(arenas)],
                             capture_output=True, text=True, timeout=120, check=True)
        return int(out.stdout.strip())

    assert heaps(ARENAS) <= ARENAS
    assert heaps(64) > ARENAS
