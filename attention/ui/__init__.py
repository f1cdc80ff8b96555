"""The only Streamlit code outside app.py and pages/: sidebar, URL state, caching, text."""
import torch

# Streamlit runs every session's script in a thread of one server process. One torch thread
# per computation keeps concurrent sessions from oversubscribing a small machine's cores
# (measured on 2 cores under load: OpenMP spin-waits made a training sweep 8x slower).
torch.set_num_threads(1)
