"""The sentences a page writes from its numbers, with their intervals and counts (no torch)."""

__all__: list[str] = []   # import its modules: conclusions.<module>
