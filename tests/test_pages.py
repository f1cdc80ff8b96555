"""The one list of pages (attention/ui/pages.py) is what Streamlit serves: the pages/ folder
holds exactly its scripts, in its order, and each URL path is the one Streamlit derives from
the file name, so an old link keeps opening the same page (tests/test_browser_app.py opens
each on a fresh server)."""
from pathlib import Path

from streamlit.source_util import page_icon_and_name, page_sort_key

from attention.i18n import catalog
from attention.ui.pages import PAGES, SCRIPTS, by_title
from tests.apptest import ROOT

OLD_PATHS = ("", "Heatmap", "Score_analysis", "Model_heads", "Is_sharper_better",
             "Does_the_model_use_it", "Corpus")   # in links shared since each page came


def test_the_pages_folder_holds_exactly_the_listed_pages_in_their_order():
    folder = sorted((ROOT / "pages").glob("*.py"), key=page_sort_key)
    assert SCRIPTS[0] == "app.py"
    assert [f"pages/{path.name}" for path in folder] == list(SCRIPTS[1:])


def test_each_url_path_is_streamlits_and_old_paths_still_exist():
    for entry in PAGES[1:]:
        assert entry.url_path == page_icon_and_name(Path(entry.script))[1]
    assert PAGES[0].url_path == ""
    assert set(OLD_PATHS) <= {entry.url_path for entry in PAGES}


def test_each_page_has_a_title_in_both_languages_and_calls_its_own_setup():
    for entry in PAGES:
        for lang in ("en", "zh"):
            assert catalog(lang)[entry.title]
        assert f'page_setup("{entry.title}"' in (ROOT / entry.script).read_text(encoding="utf-8")
    assert by_title("nav.heatmap").url_path == "Heatmap"
