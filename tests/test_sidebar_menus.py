"""The sidebar's share menu and snapshot box draw their content only while open (a click
elsewhere then renders one button each, not a link, an uploader and a download button), and
opened they hold what they held before: the link of the current view, the save and load."""
from urllib.parse import parse_qs, urlsplit

from attention.spec import AttentionSpec
from attention.ui.layout import SHARE_KEY, TUCKED_KEY
from attention.ui.snapshot import BOX_KEY, UPLOAD_KEY
from tests.apptest import open_menu, open_page

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), heads=2, d_k=8)


def _sidebar_contents(at):
    return {"code": len(at.sidebar.code), "uploaders": len(at.sidebar.get("file_uploader")),
            "downloads": len(at.sidebar.get("download_button"))}


def test_closed_menus_draw_nothing_and_open_ones_their_content():
    at = open_page("pages/1_Heatmap.py", SPEC, hm_head="1")
    assert not at.exception
    assert _sidebar_contents(at) == {"code": 0, "uploaders": 0, "downloads": 0}
    at = open_menu(at, SHARE_KEY)
    assert not at.exception and _sidebar_contents(at)["code"] == 1
    link = {k: v[0] for k, v in parse_qs(urlsplit(at.sidebar.code[0].value).query).items()}
    # the link is the URL of the view on screen: the spec, the head picked, the language
    assert link == dict(at.query_params)
    assert AttentionSpec.from_query(link) == SPEC
    assert link["hm_head"] == "1" and link["lang"] == "en"
    at = open_menu(at, BOX_KEY)
    assert not at.exception
    assert _sidebar_contents(at) == {"code": 1, "uploaders": 1, "downloads": 1}
    assert at.sidebar.get("file_uploader")[0].key == UPLOAD_KEY


def _toy_values(at) -> dict:
    return {n: at.sidebar.number_input(key=f"in_{n}").value for n in ("d_model", "d_k", "heads", "seed")}


def test_the_toy_settings_are_drawn_only_where_they_apply_and_keep_their_values():
    """Set on the Heatmap, the random projections' settings are put away (not drawn) on a page
    that does not use them and with a real model, yet the spec and the URL keep them, and
    they come back as they were on the Heatmap and with the random projections again."""
    at = open_page("pages/1_Heatmap.py", SPEC)
    at.sidebar.number_input(key="in_d_k").set_value(16).run()
    at.sidebar.toggle(key="in_positional").set_value(False).run()
    set_here = {"d_model": SPEC.d_model, "d_k": 16, "heads": 2, "seed": SPEC.seed}
    assert not at.exception and _toy_values(at) == set_here
    at.switch_page("pages/3_Model_heads.py").run()
    assert not at.exception
    assert [w.key for w in at.sidebar.number_input] == ["in_temperature"]
    assert not [w for w in at.sidebar.toggle if w.key == "in_positional"]
    spec, _ = AttentionSpec.parse_query(dict(at.query_params))
    assert (spec.d_k, spec.heads, spec.positional) == (16, 2, False)
    at = open_menu(at, TUCKED_KEY)          # opened, the box shows them, and a note
    assert _toy_values(at) == set_here and any("does not use" in c.value for c in at.sidebar.caption)
    at.switch_page("pages/1_Heatmap.py").run()
    at.sidebar.radio(key="in_source").set_value("pretrained").run()
    assert not at.exception
    assert [w.key for w in at.sidebar.number_input] == ["in_temperature"]   # the model fixes them
    assert any("fixes the sizes" in c.value for c in at.sidebar.caption)
    at.sidebar.radio(key="in_source").set_value("toy").run()
    assert not at.exception and _toy_values(at) == set_here
    assert at.sidebar.toggle(key="in_positional").value is False


def test_the_put_away_settings_open_on_an_error_about_them():
    """Settings that give too much work, set on the Heatmap, stop Model heads too: there the
    box that holds them opens by itself, so the numbers the message names are on screen."""
    at = open_page("pages/1_Heatmap.py", AttentionSpec(tokens=("w",) * 512, d_k=8))
    at.sidebar.number_input(key="in_d_model").set_value(1024).run()
    at.sidebar.number_input(key="in_d_k").set_value(1024).run()
    at.sidebar.number_input(key="in_heads").set_value(16).run()
    assert at.error and "more computation" in at.error[0].value
    at.switch_page("pages/3_Model_heads.py").run()
    assert not at.exception and at.error
    assert _toy_values(at)["d_k"] == 1024
