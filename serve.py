"""Start the dashboard with its slow work already under way:

    python serve.py [any `streamlit run` option, e.g. --server.port 8501]

is `streamlit run app.py [options]` in the same process as a warm-up thread started first
(attention/ui/warmup.py: imports, the bundled model, the default views' results), so a shared
link to a freshly started server does not wait for work that could have started earlier.
A deep link works while the warm-up runs, and the warm-up gives way to it: no step starts
while a page is being drawn, and the model load and training wait until the pages rest. `streamlit run app.py` works too, without the
warm-up; ATTENTION_EXPLORER_WARMUP=0 turns it off here (the model then stays out of memory
until someone asks for it).

The thread imports attention.ui (and with it torch) itself: this file imports neither, so the
server starts while torch loads.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
WARMUP_ENV = "ATTENTION_EXPLORER_WARMUP"


def _warm_up() -> None:
    from attention.ui import prefetch
    from attention.ui.warmup import warm_up

    prefetch.enable()     # the pages may queue what a next click needs (attention/ui/prefetch.py)
    warm_up()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if os.environ.get(WARMUP_ENV, "1") != "0":
        threading.Thread(target=_warm_up, name="attention-warm-up", daemon=True).start()
    from streamlit.web import cli

    cli.main(["run", str(APP), *args], prog_name="streamlit")


if __name__ == "__main__":
    main()
