"""scripts/rekey_shipped.py: shipped records re-keyed byte for byte, numbers proved unchanged."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from attention import diskcache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import rekey_shipped as R  # noqa: E402


def test_a_record_is_rekeyed_with_its_frames_and_values_unchanged(tmp_path):
    frame = pd.DataFrame({"x": [0.1, np.nan, 3.0], "name": ["a", "b", "c"], "n": [1, 2, 3]})
    old, new = tmp_path / "s-old.zip", tmp_path / "s-new.zip"
    diskcache.write(old, "old" * 20, diskcache.Record(frames={"f": frame}, values={"v": 1.5}))
    assert R.rekey_zip(old, new, "new" * 20) == 0
    assert not old.exists() and diskcache.read(new, "old" * 20) is None
    got = diskcache.read(new, "new" * 20)
    pd.testing.assert_frame_equal(got.frames["f"], frame)
    assert got.values == {"v": 1.5}


def test_max_diff_sees_a_changed_number_a_changed_label_and_a_missing_column():
    a = pd.DataFrame({"x": [0.1, np.nan], "name": ["a", "b"]})
    assert R.max_diff({"f": a}, {"f": a.copy()}) == 0
    assert R.max_diff({"f": a}, {"f": a.assign(x=[0.1 + 1e-9, np.nan])}) > 0
    assert R.max_diff({"f": a}, {"f": a.assign(x=[0.1, 0.0])}) == np.inf
    assert R.max_diff({"f": a}, {"f": a.assign(name=["a", "c"])}) == np.inf
    assert R.max_diff({"f": a}, {"f": a[["x"]]}) == np.inf
    assert R.max_diff({"f": a}, {"g": a}) == np.inf


def test_every_shipped_record_is_under_the_current_key(capsys):
    """Fails after a change that moves shipped results' code: run scripts/rekey_shipped.py
    (numbers unchanged) or the store's ship command (numbers changed)."""
    assert R.main(["--check"]) == 0, capsys.readouterr().out
