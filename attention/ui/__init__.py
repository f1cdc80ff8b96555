"""The only Streamlit code outside app.py and pages/: sidebar, URL state, caching, text."""
import os
import sys

# One intra-op torch thread for every computation the UI starts (analyses, the model, the
# training runs of "Is sharper better?"): sessions run side by side, and several OpenMP teams
# spin-waiting for the same cores slow every session down. OpenMP's and MKL's variables are
# read when torch loads, and every thread's first parallel operation takes its count from
# them: set here, when the first page imports attention.ui and before any page imports torch,
# they cover every session's thread (Streamlit runs each script run in a new thread), and
# each new thread's first matmul does not set up MKL's threading again (4 ms idle, 15-30 ms
# while the browser draws on the same cores: bench/threads.py). Pages that only read stored
# results never import torch at all (docs/architecture.md, "Imports"); if something imported
# it before this module, its count is set directly. tests/test_ui_threads.py checks both.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)

# The libraries every page draws with are imported here, first, with the cyclic garbage
# collector paused, and what they built is then frozen (gc.freeze: out of every later
# collection's reach, torch's import included). Otherwise the full collections these imports
# trigger, and the pages' own imports after them, walk the growing heap again and again for
# nothing: 0.3 s of a cold link's 1.5 s of imports. The 8,000 objects the imports left as
# garbage stay (no change in the RSS, once per process); the warm-up collects and freezes
# again later (docs/architecture.md, "Imports").
import gc  # noqa: E402

_collecting = gc.isenabled()
gc.disable()
try:
    import altair  # noqa: E402,F401
    import pandas  # noqa: E402,F401
    import pyarrow  # noqa: E402,F401
    gc.freeze()
finally:
    if _collecting:
        gc.enable()

__all__: list[str] = []   # import its modules: ui.<module>
