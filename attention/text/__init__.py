"""Text in: pasted tokens (tokens.py; attention.tokens is its public face), corpora (bundled
texts, files, uploads), Chinese segmentation, the examples."""

__all__: list[str] = []   # import its modules: text.<module>
