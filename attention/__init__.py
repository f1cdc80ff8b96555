"""Attention Explorer's core: one attention implementation and everything computed from it.

Nothing here imports streamlit (only attention/ui/ does), so the core runs in scripts,
notebooks and tests as it runs in the dashboard.
"""

__all__: list[str] = []   # import its modules: attention.<module>
