"""Public entry point (docs/architecture.md, "Contracts"): parse a pasted token list. The code
lives in attention/text/tokens.py with the rest of the text that comes in."""
from attention.text.tokens import TokenError, parse_tokens

__all__ = ["TokenError", "parse_tokens"]
