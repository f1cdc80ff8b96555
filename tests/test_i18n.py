"""Both interface languages define the same keys, and pages use only keys that exist."""
import re
import string
from pathlib import Path

import pytest

from attention.i18n import LANGUAGES, LOCALES, catalog, translate

ROOT = Path(__file__).resolve().parent.parent


def test_every_namespace_exists_in_every_language():
    names = {lang: {p.name for p in (LOCALES / lang).glob("*.toml")} for lang in LANGUAGES}
    assert names["en"] and all(n == names["en"] for n in names.values())


@pytest.mark.parametrize("lang", [lang for lang in LANGUAGES if lang != "en"])
def test_same_keys_and_placeholders_as_english(lang):
    en, other = catalog("en"), catalog(lang)
    assert sorted(set(en) - set(other)) == [], f"missing in {lang}"
    assert sorted(set(other) - set(en)) == [], f"only in {lang}"
    fields = lambda text: sorted(f for _, f, _, _ in string.Formatter().parse(text) if f)
    mismatched = [k for k in en if fields(en[k]) != fields(other[k])]
    assert mismatched == []


def test_chinese_text_is_actually_chinese():
    zh = catalog("zh")
    cjk = [k for k, v in zh.items() if re.search(r"[\u4e00-\u9fff]", v)]
    assert len(cjk) > 0.8 * len(zh)


def test_keys_used_in_code_exist():
    """Every t("ns.key") / translate(lang, "ns.key") and UserError("ns.key") literal resolves."""
    pattern = re.compile(r"""(?:\bt|translate\([^,]+,|Error)\(\s*f?["']([a-z_]+\.[a-z0-9_.]+)["']""")
    sources = [ROOT / "app.py", *ROOT.glob("pages/*.py"), *ROOT.glob("attention/**/*.py")]
    used = {m for path in sources for m in pattern.findall(path.read_text(encoding="utf-8"))}
    assert used, "the pattern found no keys: it is broken"
    known = catalog("en")
    assert sorted(k for k in used if k not in known) == []


def test_translate_formats_values_and_falls_back_to_english():
    assert "2,048" in translate("en", "errors.tokens_too_many", count=3000, limit=2048)
    assert translate("xx", "nav.input") == translate("en", "nav.input")
    with pytest.raises(KeyError):
        translate("en", "nav.no_such_key")
