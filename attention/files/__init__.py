"""What is about files: upload parsing, export, the disk cache of results."""

__all__: list[str] = []   # import its modules: files.<module>
