"""A snapshot exported and loaded back reproduces the same matrices."""
import json

import pytest

from attention.files import snapshot
from attention.analysis import analyze
from attention.errors import UserError
from attention.spec import AttentionSpec
from attention.ui.snapshot import BOX_KEY
from tests.apptest import open_menu, run_page

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), heads=2, d_k=8,
                     causal=True, temperature=0.7, seed=3)


def test_round_trip_reproduces_matrices_and_metrics():
    a = analyze(SPEC)
    spec, data = snapshot.load(snapshot.dumps(a))
    assert spec == SPEC
    assert snapshot.compare(analyze(spec), data) < 1e-6
    w = data["weights"]["scaled"]
    assert len(w) == 2 * 6 * 6 and abs(w[1] - a.scaled.weights[0, 0, 1].item()) < 1e-6


def test_a_changed_number_is_detected():
    data = json.loads(snapshot.dumps(analyze(SPEC)))
    data["weights"]["unscaled"][7] += 0.01
    assert snapshot.compare(analyze(SPEC), data) == pytest.approx(0.01, abs=1e-6)


def test_large_views_store_metrics_but_not_matrices():
    big = AttentionSpec(tokens=tuple(f"t{i}" for i in range(600)), heads=4)
    data = snapshot.snapshot(analyze(big))
    assert "weights" not in data and len(data["metrics"]["scaled"]["entropy"]) == 4 * 600


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"format": "x"}',
                                 json.dumps({"format": snapshot.FORMAT, "spec": {"heads": "99"}}).encode()])
def test_bad_files_are_refused_with_a_message(raw):
    with pytest.raises(UserError):
        snapshot.load(raw)


def test_loading_a_snapshot_in_the_app_sets_the_sidebar():
    """The file goes through the sidebar's uploader (its on_change callback loads it): the
    sidebar takes the snapshot's spec and the recomputation is checked against the file."""
    at = open_menu(run_page("app.py"), BOX_KEY)
    raw = snapshot.dumps(analyze(SPEC))
    at.sidebar.file_uploader(key="snapshot_file").set_value(
        ("attention-snapshot.json", raw, "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert AttentionSpec.from_query(dict(at.query_params)) == SPEC
    for key, value in {"in_text": "the cat sat on the mat", "in_heads": 2, "in_d_k": 8,
                       "in_causal": True, "in_temperature": 0.7, "in_seed": 3}.items():
        assert at.session_state[key] == value, key
    assert any("match" in s.value for s in at.sidebar.success)


def test_an_edited_snapshot_loads_with_a_mismatch_warning():
    """A number changed by hand passes load (it is a valid document) and compare shows it."""
    data = json.loads(snapshot.dumps(analyze(SPEC)))
    data["metrics"]["scaled"]["entropy"][0] += 0.5
    at = open_menu(run_page("app.py"), BOX_KEY)
    at.sidebar.file_uploader(key="snapshot_file").set_value(
        ("edited.json", json.dumps(data).encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert AttentionSpec.from_query(dict(at.query_params)) == SPEC
    assert any("0.5" in w.value for w in at.sidebar.warning)
