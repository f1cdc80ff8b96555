"""One module per page section; the page scripts call their draw functions."""

__all__: list[str] = []   # import its modules: views.<module>
