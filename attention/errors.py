"""Errors whose message is written for the person using the dashboard.

Each carries an interface-text key and its values, so the UI can show it in the user's
language; str(error) is the English sentence.
"""
from __future__ import annotations

from attention.i18n import translate


class UserError(ValueError):
    def __init__(self, key: str, **values) -> None:
        self.key, self.values = key, values
        super().__init__(self.message("en"))

    def message(self, lang: str) -> str:
        """The sentence in `lang`; a value that is itself a UserError is translated too."""
        values = {k: v.message(lang) if isinstance(v, UserError) else v
                  for k, v in self.values.items()}
        return translate(lang, self.key, **values)
