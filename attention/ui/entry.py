"""What every page script calls first: `page_setup(title_key)` starts this server process's
background work once (the warm-up and prefetching, attention.ui.warmup and .prefetch), then
draws the shared sidebar (attention.ui.layout). So `streamlit run app.py`, Streamlit Community
Cloud and a deep link to any page all get the same fast server, with no launcher of our own.

ATTENTION_EXPLORER_WARMUP=0 turns the background work off (the tests do: nothing runs behind
an AppTest's back); the model then stays out of memory until someone asks for it.
"""
from __future__ import annotations

import os
import threading

from attention.ui import layout, prefetch
from attention.ui.warmup import warm_up

WARMUP_ENV = "ATTENTION_EXPLORER_WARMUP"
_started = threading.Event()
_lock = threading.Lock()


def start_background() -> bool:
    """Start the warm-up thread and turn prefetching on, the first time in this process;
    True when this call started them."""
    if _started.is_set() or os.environ.get(WARMUP_ENV, "1") == "0":
        return False
    with _lock:
        if _started.is_set():
            return False
        _started.set()
    prefetch.enable()
    threading.Thread(target=warm_up, name="attention-warm-up", daemon=True).start()
    return True


def page_setup(title_key: str, *, needs_spec: bool = True) -> layout.Page:
    """Start the background work (once per process), then draw the page's shared parts."""
    start_background()
    return layout.start_page(title_key, needs_spec=needs_spec)
