"""What is about files: upload parsing and export (results stores live with their feature,
keyed by attention.diskcache)."""

__all__: list[str] = []   # import its modules: files.<module>
