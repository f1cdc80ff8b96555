"""Text in: corpora (bundled texts, files, uploads), Chinese segmentation, the examples."""

__all__: list[str] = []   # import its modules: text.<module>
