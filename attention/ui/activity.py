"""Is a page being drawn? Background work (the warm-up, prefetching) waits for the pages: it
starts only once no session's page script has run for a while, so a visitor's own work never
waits behind a guess."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Streamlit runs each page's script in a thread of this name, alive from the start of a run
# until the session has no rerun queued (tests/test_startup.py checks the name still holds).
SCRIPT_THREAD = "ScriptRunner.scriptThread"
QUIET = 1.5     # s without a script run before deferred work starts: the browser still draws
                # the charts after the run ends, and a first visitor's browser fetches the
                # page's code before its first run starts
MAX_DEFER = 300.0   # s: deferred work runs after this long even on a server that never rests
POLL = 0.05         # s between looks at the script threads


def page_running() -> bool:
    """Is any session's page script running in this process now?"""
    return any(thread.name == SCRIPT_THREAD for thread in threading.enumerate())


def wait_until_quiet(busy: Callable[[], bool] = page_running, quiet: float = QUIET,
                     limit: float = MAX_DEFER, poll: float = POLL) -> float:
    """Return once busy() has been false for `quiet` seconds in a row, counted from the call
    (or after `limit` seconds in all); the seconds waited."""
    start = calm_since = time.monotonic()
    while True:
        now = time.monotonic()
        running = busy()
        if running:
            calm_since = now
        if (not running and now - calm_since >= quiet) or now - start >= limit:
            return now - start
        time.sleep(poll)
