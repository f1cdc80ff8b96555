"""The Model heads page in AppTest: grid drawn, head picked from the URL, table present,
and the numbers on screen are the model's own attention weights."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.config import BUNDLED
from attention.models.loading import bundled_path, load_model
from attention.measures.heads import HEAD_COLUMNS, SINK_COLUMNS
from attention.spec import AttentionSpec
from attention.i18n import translate
from tests.apptest import (captions, chart_frames, chart_places, comparison_cells, figures,
                           grid_cells, headings, open_page, open_part)

TEXT = "the cat sat on the mat ."   # 9 word pieces: the grid is drawn unpooled


def open_model_page(spec: AttentionSpec, **params: str) -> AppTest:
    return open_page("pages/3_Model_heads.py", spec, **params)


@pytest.fixture(scope="module")
def own_weights():
    """transformers' eager BertModel's output_attentions for TEXT on the bundled checkpoint
    (independent of the core): (layers, heads, n, n)."""
    from transformers import AutoModel

    eager = AutoModel.from_pretrained(bundled_path(), attn_implementation="eager").eval()
    enc = load_model(BUNDLED).tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = eager(**enc, output_attentions=True)
    return torch.stack(out.attentions)[:, 0]


@pytest.fixture(scope="module")
def page():
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained")
    return open_model_page(spec, mh_layer="3", mh_head="7")


def test_no_exception_and_head_from_url(page):
    assert not page.exception
    assert not page.error
    pickers = {s.label: s.value for s in page.selectbox}
    assert pickers["Layer"] == 3 and pickers["Head"] == 7
    assert any("Layer 3, head 7" in s for s in headings(page))
    assert page.query_params["mh_layer"] == "3" and page.query_params["mh_head"] == "7"
    assert page.text[0].value == "[CLS] the cat sat on the mat . [SEP]"
    # shown as plain text: the main area has no code block, whose 1.5 MB highlighter took
    # 0.5 s of a cold link in the browser (the sidebar's share link has one, drawn on opening)
    assert not page.main.code


def test_grid_holds_all_72_heads_of_the_model(page, own_weights):
    grids = grid_cells(page)
    assert len(grids) == 1
    frame = grids[0]
    assert len(frame) == 6 * 12 * 9 * 9
    assert set(zip(frame["layer"], frame["head"])) == {(l, h) for l in range(6) for h in range(12)}
    cell = frame.set_index(["layer", "head", "qb", "kb"])["weight"]
    for layer, head, i, j in [(3, 7, 0, 8), (0, 2, 4, 3), (5, 11, 8, 0)]:
        assert cell[(layer, head, i, j)] == pytest.approx(own_weights[layer, head, i, j].item(),
                                                          abs=5e-4 + 1e-9)   # 3 decimals


def test_the_grid_frames_the_picked_head_after_each_pick():
    """The grid's figure is built once per text; a pick moves only its frame, and the frame
    follows the pickers (and the grid's own images stay those of the first run)."""
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"))
    first = next(f for f in figures(at) if f["kind"] == "grid")
    assert first["current"] == [0, 0]
    for layer, head in [(2, 5), (5, 11)]:
        at.selectbox(key="view_mh_layer").set_value(layer).run()
        at.selectbox(key="view_mh_head").set_value(head).run()
        grid = next(f for f in figures(at) if f["kind"] == "grid")
        assert grid["current"] == [layer, head]
        assert grid["panels"] == first["panels"] and grid["layout"] == first["layout"]


def test_the_sinks_toggle_moves_no_figure():
    """Hiding the sinks adds a note above the grid, drawn by the grid figure itself: every
    figure of the part keeps its place, so the browser updates them instead of mounting
    each again."""
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"))
    places, notes = chart_places(at), captions(at)
    assert len(places) >= 4                         # grid, comparison, rollout, value panels
    at.toggle(key="in_hide_sinks").set_value(True).run()
    hidden = translate("en", "model.grid_hidden")
    assert not at.exception and hidden not in notes
    assert sorted(captions(at)) == sorted([*notes, hidden])
    assert chart_places(at) == places


def test_comparison_shows_the_picked_head(page, own_weights):
    cells = comparison_cells(page)
    assert cells, "the scaled/unscaled comparison is missing"
    frame = cells[0]
    assert len(frame) == 81                                   # head 7's, to the tooltips' 4 decimals
    got = torch.tensor(frame.sort_values(["query_pos", "key_pos"])["weight"].to_numpy())
    assert torch.allclose(got.view(9, 9), own_weights[3, 7].double(), atol=5e-5 + 1e-9, rtol=0)


def test_one_bar_holds_the_pickers_options_and_every_chart_download(own_weights):
    """Under the grid, one bar: layer and head pickers, an Options menu (the comparison's
    colour scale) and one Download menu with the comparison's, the rollout's and the norms'
    files, each under its heading, for the picked layer and head; both menus drawn closed."""
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"),
                         mh_layer="3", mh_head="7")
    menus = {p.proto.popover.label: p for p in at.main.get("popover")}
    assert list(menus) == ["Options", "Download"] and not at.main.get("download_button")
    assert not at.main.get("toggle")
    at.session_state["mh_dl"] = True
    at.run()
    menu = {p.proto.popover.label: p for p in at.main.get("popover")}["Download"]
    assert [c.value for c in menu.get("caption")] == [
        translate("en", key) for key in ("heatmap.download_comparison", "model.download_rollout",
                                         "model.download_norms")]
    names = [b.proto.id for b in menu.get("download_button")]
    assert len(names) == 9 and "model_rollout_l3" in names[4] and "model_norms_l3_h7" in names[7]
    # Options: one colour scale off gives the scaled panel a legend of its own, to its max.
    comparison = lambda: next(f for f in figures(at)                    # noqa: E731
                              if f["kind"] == "cells" and len(f["panels"]) == 3)
    assert comparison()["panels"][0]["legend"] is None                 # shared: one legend
    at.session_state["mh_opts"] = True
    at.run()
    at.toggle(key="view_mh_shared").set_value(False).run()
    assert not at.exception and at.query_params["mh_shared"] == "False"
    ticks = [float(label) for _, label in comparison()["panels"][0]["legend"]["ticks"]]
    assert ticks[-1] <= own_weights[3, 7].max().item() + 1e-6


@pytest.fixture(scope="module")
def table_page():
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained")
    return open_model_page(spec, mh_tab="table")


def test_only_the_open_tab_is_drawn(page, table_page):
    """The heads tab (a link's default) draws no table; the table tab draws no grid; the
    open tab's id is in the address bar."""
    assert not page.dataframe and page.query_params["mh_tab"] == "heads"
    assert not grid_cells(table_page) and table_page.query_params["mh_tab"] == "table"
    assert not table_page.exception and len(table_page.dataframe) == 1


def test_the_open_tab_stays_across_a_language_switch_and_a_bad_tab_falls_back():
    """The URL keeps the tab's id, not its label: switching to Chinese keeps the table tab
    open under its Chinese name; a tab the page does not have opens the heads tab."""
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained")
    at = open_part(open_model_page(spec), "table")
    assert at.query_params["mh_tab"] == "table" and len(at.dataframe) == 1
    at.sidebar.selectbox(key="lang").set_value("zh").run()
    assert not at.exception
    assert at.session_state["view_mh_tab"] == "table"
    picker = next(w for w in at.get("button_group") if w.proto.id.endswith("view_mh_tab"))
    assert picker.proto.options[1].content == "各头统计量"          # its name in Chinese
    assert at.query_params["mh_tab"] == "table" and len(at.dataframe) == 1
    bad = open_model_page(spec, mh_tab="<script>")
    assert not bad.exception and bad.query_params["mh_tab"] == "heads" and grid_cells(bad)


def test_a_link_with_interventions_and_no_tab_opens_the_interventions():
    """Links made before the tabs carried ?mh_iv= on one long page: they open on the
    interventions they name."""
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained")
    at = open_model_page(spec, mh_iv="ablate:1:2")
    assert not at.exception and at.query_params["mh_tab"] == "iv"
    assert any("Interventions" in s.value for s in at.subheader)
    assert not grid_cells(at)


def test_table_lists_every_head(table_page, own_weights):
    table = table_page.dataframe[0].value
    assert len(table) == 72
    row = table[(table["Layer"] == 3) & (table["Head"] == 7)].iloc[0]
    assert row["To [SEP]"] == pytest.approx(own_weights[3, 7, :, 8].mean().item(), abs=1e-5)
    assert row["To [CLS]"] == pytest.approx(own_weights[3, 7, :, 0].mean().item(), abs=1e-5)


@pytest.fixture(scope="module")
def own_value_norms():
    """||f(x_j)|| of layer 3, head 7 for TEXT from transformers' own BertModel: the layer's
    input (hidden state 3), its value projection's head-7 columns, then the output
    projection's head-7 columns, f(x) = (x W_V + b_V) W_O^h (Kobayashi et al. 2020): (n,)."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(bundled_path()).eval()
    enc = load_model(BUNDLED).tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        x = model(**enc, output_hidden_states=True).hidden_states[3][0]        # (n, 384)
        attention = model.encoder.layer[3].attention
        part = slice(7 * 32, 8 * 32)                                           # head 7
        v = attention.self.value(x)[:, part]                                   # (n, 32)
        f = v @ attention.output.dense.weight[:, part].T                       # (n, 384)
    return f.norm(dim=-1)


def test_rollout_and_value_weighted_views(page, own_weights, own_value_norms):
    """The value norms' bars are the head's own ||f(x_j)||, shaded by the mean weight its
    queries give each key (both from transformers, not from the page's code)."""
    titles = headings(page)
    assert any("rollout" in s.lower() for s in titles)
    assert any("Kobayashi" in s for s in titles)
    bars = [f for f in figures(page) if f["kind"] == "bars"]
    assert len(bars) == 1 and bars[0]["n"] == 9
    assert bars[0]["heights"] == pytest.approx(own_value_norms.tolist(), abs=2e-3)
    assert bars[0]["shades"] == pytest.approx(own_weights[3, 7].mean(dim=0).tolist(), abs=2e-3)
    assert bars[0]["x"]["labels"][2] == "cat ·2"
    assert not [f for f in chart_frames(page) if "f_norm" in f]    # no Vega chart of them


def test_value_weighted_panels_share_one_figure(page, own_weights, own_value_norms):
    """The raw weights and ||alpha_ij f(x_j)|| = alpha_ij ||f(x_j)|| are one figure of two
    panels, each with its own legend; a cell's tooltip holds both values (from transformers)."""
    [value] = [f for f in figures(page) if set(f["tip"].get("digits") or ()) == {"weight", "norm"}]
    assert [p["title"] for p in value["panels"]] == ["Attention weight α_ij",
                                                      "Value-weighted norm ‖α_ij f(x_j)‖"]
    assert all(p["legend"] is not None for p in value["panels"])
    alpha = own_weights[3, 7]                                                  # (n, n)
    shown = {name: np.array(v, dtype=float) for name, v in value["tip"]["values"].items()}
    np.testing.assert_allclose(shown["weight"], alpha.numpy(), atol=2e-3)
    moved = (alpha * own_value_norms[None, :]).numpy()
    np.testing.assert_allclose(shown["norm"], moved, rtol=2e-2, atol=2e-3)


def test_every_head_statistic_draws_the_table_column():
    """Each choice of the statistic picker draws its layers x heads chart from the table's
    own column (entropy, which has no fixed top, once failed altair's schema)."""
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"),
                         mh_tab="table")
    table = at.dataframe[0].value
    for stat in (*HEAD_COLUMNS, *SINK_COLUMNS):
        at.selectbox(key="view_mh_stat").set_value(stat).run()
        assert not at.exception, stat
        charts = [f for f in chart_frames(at) if {"layer", "head", stat} <= set(f)]
        assert len(charts) == 1, stat
        assert len(charts[0]) == len(table) == 72
        assert at.query_params["mh_stat"] == stat


def test_toy_source_note_and_bad_url_head():
    """A link's head past MiniLM's last is clamped to it with a notice (as the sidebar's
    layer is); a malformed layer falls back to the first."""
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split())), mh_head="99", mh_layer="x")
    assert not at.exception
    assert any("always uses MiniLM" in i.value for i in at.info)
    pickers = {s.label: s.value for s in at.selectbox}
    assert pickers["Layer"] == 0 and pickers["Head"] == 11
    assert [w.value for w in at.warning] == [
        "The link asked for head 99; all-MiniLM-L6-v2 has heads 0 to 11, so head 11 is shown."]


def test_one_owner_for_the_layer_the_mask_and_the_temperature():
    """On Model heads the page's pickers own the layer and the interventions own a head's
    temperature: the sidebar's layer, mask and temperature are disabled with their reason.
    A fresh session opens on the sidebar's layer; a link's layer past the model's last gets
    the sidebar's own notice, and the layer shown is the last."""
    spec = AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained", layer=4,
                         temperature=2.0, causal=True)
    at = open_model_page(spec)
    assert not at.exception and not at.error
    sidebar = {w.key: w for w in (*at.sidebar.slider, *at.sidebar.toggle,
                                  *at.sidebar.number_input)}
    assert all(sidebar[k].disabled for k in ("in_layer", "in_causal", "in_temperature"))
    assert not sidebar["in_hide_sinks"].disabled
    captions = [c.value for c in at.sidebar.caption]
    assert any(c.startswith("Not used here: Model heads picks its layer") for c in captions)
    assert any("intervention (τ)" in c for c in captions)
    assert not at.info                            # no second notice about the same settings
    assert at.selectbox(key="view_mh_layer").value == 4
    assert any("Layer 4, head 0" in s for s in headings(at))
    far = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"),
                          mh_layer="9")
    assert far.selectbox(key="view_mh_layer").value == 5
    side = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), source="pretrained"),
                           layer="9")
    assert [w.value for w in far.warning] == [w.value for w in side.warning] == [
        "The link asked for layer 9; all-MiniLM-L6-v2 has layers 0 to 5, so layer 5 is shown."]
    heatmap = open_page("pages/1_Heatmap.py", spec)          # where they apply: enabled
    assert not any(w.disabled for w in (*heatmap.sidebar.slider, *heatmap.sidebar.toggle,
                                        *heatmap.sidebar.number_input))


def test_a_link_with_the_old_names_opens_the_same_view_under_the_new_ones():
    """Links made before the <page>_<name> scheme (?mlayer=2&mhead=3&mstat=...) still open
    layer 2, head 3 and that column; the address bar then carries only the new names. Where
    a link has both, the new name wins."""
    spec = AttentionSpec(tokens=tuple(TEXT.split()))
    at = open_model_page(spec, mlayer="2", mhead="3", mstat="max_weight")
    assert not at.exception and not at.error
    pickers = {s.label: s.value for s in at.selectbox}
    assert pickers["Layer"] == 2 and pickers["Head"] == 3
    assert any("Layer 2, head 3" in s for s in headings(at))
    table = open_model_page(spec, mstat="max_weight", mh_tab="table")
    assert table.selectbox(key="view_mh_stat").value == "max_weight"
    query = dict(at.query_params)
    assert (query["mh_layer"], query["mh_head"], query["mh_stat"]) == ("2", "3", "max_weight")
    assert not {"mlayer", "mhead", "mstat"} & set(query)
    both = open_model_page(spec, mlayer="2", mh_layer="4")
    assert {s.label: s.value for s in both.selectbox}["Layer"] == 4
    assert both.query_params["mh_layer"] == "4" and "mlayer" not in dict(both.query_params)


def test_text_too_long_for_the_model_is_a_message():
    at = open_model_page(AttentionSpec(tokens=("word",) * 600, source="pretrained"))
    assert not at.exception
    assert any("512" in e.value for e in at.error)


# ---- Bring your own --------------------------------------------------------------------------

TOY = AttentionSpec(tokens=("a", "b", "a", "c", "d"), d_model=16, d_k=8, heads=2, seed=3)


def upload_to(at: AppTest, key: str, name: str, data: bytes) -> None:
    at.file_uploader(key=key).set_value((name, data, "application/octet-stream"))


def test_uploaded_qk_show_the_same_matrices():
    from attention.files import upload
    from attention.analysis import analyze

    ref = analyze(TOY)
    at = open_model_page(TOY, up_head="1", mh_tab="upload")
    upload_to(at, "up_q", "q.npy", upload.to_npy(ref.q))
    upload_to(at, "up_k", "k.npy", upload.to_npy(ref.k))
    at.run()
    assert not at.exception
    assert any("2 head(s), 5 tokens, d_k = 8" in s.value for s in at.success)
    frames = comparison_cells(at)
    assert frames, "the uploaded head's comparison is missing"
    got = frames[-1].sort_values(["query_pos", "key_pos"])      # head 1's (up_head=1)
    assert torch.allclose(torch.tensor(got["weight"].to_numpy()).view(5, 5),
                          ref.scaled.weights[1].double(), atol=5e-5 + 1e-9, rtol=0)
    assert torch.allclose(torch.tensor(got["unscaled_weight"].to_numpy()).view(5, 5),
                          ref.unscaled.weights[1].double(), atol=5e-5 + 1e-9, rtol=0)


def test_uploaded_files_stay_when_another_part_is_opened_until_forgotten():
    """Only the open part of the page is drawn, and an uploader that is not drawn forgets its
    file: the page keeps Q and K for the session, says so, and uses them again on return
    (the same weights as before); "Forget it" drops one."""
    from attention.files import upload
    from attention.analysis import analyze

    ref = analyze(TOY)
    at = open_model_page(TOY, mh_tab="upload")
    upload_to(at, "up_q", "my <b>q</b>.npy", upload.to_npy(ref.q))
    upload_to(at, "up_k", "k.npy", upload.to_npy(ref.k))
    at.run()
    first = comparison_cells(at)[-1]
    at = open_part(open_part(at, "table"), "upload")
    assert not at.exception and at.file_uploader(key="up_q").value is None   # forgotten by it
    assert [x.value for x in at.text] == ["Kept: my <b>q</b>.npy",   # as text, not HTML
                                          "Kept: k.npy"]
    again = comparison_cells(at)[-1]
    assert again.equals(first)
    torch.testing.assert_close(torch.tensor(again.sort_values(["query_pos", "key_pos"])
                                            ["weight"].to_numpy()).view(5, 5),
                               ref.scaled.weights[0].double(), atol=5e-5, rtol=0)
    at.button(key="up_q_forget").click().run()
    assert not at.exception and not comparison_cells(at)
    assert [x.value for x in at.text] == ["Kept: k.npy"]
    assert any("Upload Q and K" in i.value for i in at.info)


def test_uploaded_pickle_and_bad_matrix_give_messages():
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    at = open_model_page(TOY, mh_tab="upload")
    upload_to(at, "up_q", "q.npy", buf.getvalue())
    upload_to(at, "up_k", "k.npy", buf.getvalue())
    at.run()
    assert not at.exception
    assert any("pickled" in e.value for e in at.error)

    at = open_model_page(TOY, up_kind="matrix", mh_tab="upload")
    w = io.BytesIO()
    np.save(w, np.full((5, 5), 0.3))
    upload_to(at, "up_w", "w.npy", w.getvalue())
    at.run()
    assert not at.exception
    assert any("sums to 1.5000" in e.value for e in at.error)


def test_uploaded_attention_matrix_is_drawn_with_its_statistics():
    import numpy as np

    at = open_model_page(TOY, up_kind="matrix", mh_tab="upload")
    w = np.eye(5)[[0, 0, 1, 2, 3]]                       # every token attends to the previous one
    buf = io.BytesIO()
    np.save(buf, w)
    upload_to(at, "up_w", "w.npy", buf.getvalue())
    at.run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert len(table) == 1
    assert table["To previous"].iloc[0] == pytest.approx(1.0)
    cells = [f for f in chart_frames(at) if {"value", "query_pos"} <= set(f)]
    assert cells and cells[-1]["value"].sum() == pytest.approx(5.0)


def test_a_pasted_sentence_reaches_the_model_as_typed():
    """"Wait, what" typed with MiniLM selected: its comma is a word piece the heads attend to."""
    at = open_model_page(AttentionSpec(source="pretrained"))
    at.sidebar.text_area(key="in_text").input("Wait, what").run()
    assert not at.exception and not at.error
    assert at.text[0].value == "[CLS] wait , what [SEP]"
    grids = grid_cells(at)
    assert len(grids) == 1 and len(grids[0]) == 6 * 12 * 5 * 5


def test_example_files_are_drawn_only_while_their_box_is_open():
    """Closed, the box of example files holds nothing (no download button every click renders
    again, no toy analysis fetched); opened, one file per format the upload reads."""
    from attention.ui.views.upload import EXAMPLES_KEY
    from tests.apptest import open_menu

    at = open_model_page(TOY, mh_tab="upload")
    assert not at.exception and not at.main.get("download_button")
    at = open_menu(at, EXAMPLES_KEY)
    assert not at.exception
    names = [b.proto.label for b in at.main.get("download_button")]
    assert names == ["q.npy", "k.npy", "v.npy", "q_head0.csv", "k_head0.csv", "weights.npy"]


def test_unknown_pieces_are_counted_only_when_there_are_some():
    """A word MiniLM cannot spell gets the note with the tokenizer's own count (counted here
    from its ids); a text it spells whole gets none ("0 of the 9 pieces..." is noise)."""
    tokenizer = load_model(BUNDLED).tokenizer
    odd = "the cat ☃ sat"
    ids = tokenizer(odd)["input_ids"]
    count = sum(i == tokenizer.unk_token_id for i in ids)
    assert count >= 1
    at = open_model_page(AttentionSpec(tokens=tuple(odd.split()), text=odd, source="pretrained"))
    assert not at.exception
    note = translate("en", "model.unknown_pieces", unk=tokenizer.unk_token, count=count,
                     n=len(ids))
    assert note in [c.value for c in at.caption]
    at = open_model_page(AttentionSpec(tokens=tuple(TEXT.split()), text=TEXT, source="pretrained"))
    assert not [c.value for c in at.caption if tokenizer.unk_token in c.value]
