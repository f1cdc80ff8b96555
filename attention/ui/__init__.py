"""The only Streamlit code outside app.py and pages/: sidebar, URL state, caching, text."""
import torch

# One intra-op torch thread for every computation the UI starts (analyses, the model, the
# training runs of "Is sharper better?"): sessions run side by side, and several OpenMP teams
# spin-waiting for the same cores slow every session down. torch.set_num_threads stores a
# process-wide count that each thread applies at its first parallel torch operation;
# Streamlit runs every script run in a new thread, so setting it here, when the first page
# imports attention.ui, covers every session (tests/test_ui_threads.py checks it). This is
# the only place the UI sets it; docs/architecture.md, "Threads".
torch.set_num_threads(1)
