"""The only Streamlit code outside app.py and pages/: sidebar, URL state, caching, text."""
import os

# One intra-op torch thread for every computation the UI starts (analyses, the model, the
# training runs of "Is sharper better?"): sessions run side by side, and several OpenMP teams
# spin-waiting for the same cores slow every session down. torch.set_num_threads stores a
# process-wide count that each thread applies at its first parallel torch operation;
# Streamlit runs every script run in a new thread, so setting it here, when the first page
# imports attention.ui, covers every session (tests/test_ui_threads.py checks it). This is
# the only place the UI sets it; docs/architecture.md, "Threads".
#
# The same count in OpenMP's and MKL's variables, read when torch loads (so before it is
# imported): otherwise each new thread's first matmul sets up MKL's threading again, 4 ms
# idle and 15-30 ms while the browser draws on the same cores, on every click
# (bench/threads.py).
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

# The heavy libraries every page needs are imported here, first, with the cyclic garbage
# collector paused, and what they built is then frozen (gc.freeze: out of every later
# collection's reach). Importing them allocates about 260,000 long-lived objects; otherwise
# the full collections that triggers, during these imports and the pages' own after them,
# walk that heap again and again for nothing: 0.3 s of a cold link's 1.5 s of imports. The
# 8,000 objects the imports left as garbage stay (no change in the RSS, once per process);
# the warm-up collects and freezes again later (docs/architecture.md, "Imports").
import gc  # noqa: E402

_collecting = gc.isenabled()
gc.disable()
try:
    import altair  # noqa: E402,F401
    import pandas  # noqa: E402,F401
    import torch  # noqa: E402
    gc.freeze()
finally:
    if _collecting:
        gc.enable()

torch.set_num_threads(1)
