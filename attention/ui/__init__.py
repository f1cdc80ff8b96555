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

import torch  # noqa: E402

torch.set_num_threads(1)
