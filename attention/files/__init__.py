"""What is about files: upload parsing, export and snapshots (results stores live with their feature,
keyed by attention.diskcache)."""

__all__: list[str] = []   # import its modules: files.<module>
