"""The sidebar's share menu and snapshot box draw their content only while open (a click
elsewhere then renders one button each, not a link, an uploader and a download button), and
opened they hold what they held before: the link of the current view, the save and load."""
from urllib.parse import parse_qs, urlsplit

from attention.spec import AttentionSpec
from attention.ui.layout import SHARE_KEY
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
