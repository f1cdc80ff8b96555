"""Work a visitor's next click will probably need, done while no page is running.

A head's overview at 2,048 tokens is its attention recomputed and pooled, three PNGs: about
0.13 s of a first click on that head (bench: 230-260 ms from the pointer, against 100-130
once pooled). After a page draws one head, the others are queued here and computed by one
background thread, one at a time, each only once no page script has run for QUIET seconds
(activity.page_running), so a visitor's own work never waits behind a guess. The queue is
short (JOBS) and drops what does not fit; a job whose result a visitor computed meanwhile is
skipped, since it goes through the same cache.cached as the page. Only a server started by
serve.py prefetches (`enable`): under `streamlit run app.py` and in AppTest nothing runs
behind the pages' back.

    prefetch(("images", key), lambda: cache.cached("images", key, compute))
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Hashable

from attention.ui.activity import page_running, wait_until_quiet

JOBS = 8          # jobs waiting at most (each holds its Analysis: q, k, v, a few MB)
QUIET = 0.3       # s without a page script before a job starts
LIMIT = 30.0      # s a job waits for quiet at most before it is dropped

_jobs: queue.Queue = queue.Queue(maxsize=JOBS)
_queued: set[Hashable] = set()
_lock = threading.Lock()
_worker: threading.Thread | None = None
_enabled = False


def enable(on: bool = True) -> None:
    """Let `prefetch` queue work (serve.py does, with its warm-up)."""
    global _enabled
    _enabled = on


def prefetch(key: Hashable, compute: Callable[[], object],
             busy: Callable[[], bool] = page_running) -> bool:
    """Queue compute() (its result kept by compute itself, through cache.cached) unless
    prefetching is off, the same key is queued already or the queue is full; True if queued."""
    global _worker
    with _lock:
        if not _enabled or key in _queued:
            return False
        try:
            _jobs.put_nowait((key, compute, busy))
        except queue.Full:
            return False
        _queued.add(key)
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_work, name="prefetch", daemon=True)
            _worker.start()
    return True


def _work() -> None:
    from streamlit.logger import get_logger

    while True:
        key, compute, busy = _jobs.get()
        try:
            if wait_until_quiet(busy, QUIET, limit=LIMIT) < LIMIT:
                compute()
        except Exception:   # a guess that fails costs nothing: the page computes it on demand
            get_logger(__name__).warning("prefetch of %r failed", key, exc_info=True)
        finally:
            with _lock:
                _queued.discard(key)
            _jobs.task_done()


def drain() -> None:
    """Wait until every queued job is done (tests)."""
    _jobs.join()
