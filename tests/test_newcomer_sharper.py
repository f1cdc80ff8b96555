"""What a newcomer meets on "Is sharper better?" with a seed that did not ship (issue 44, item
9): before training starts the page states how long it will take, from a rate measured on
this server (a few training steps timed just now, or the last such run), and after it the
actual time beside the estimate; a seed already trained shows neither and times nothing.

Training is shortened by patching the experiment's constants (the page reads them live), and
results go to this test's own disk cache, so the seed is not stored before the test."""
from __future__ import annotations

import re
import time

import pytest

from attention.experiment import training as ex
from attention import diskcache
from attention.experiment import store as experiment_cache
from attention.i18n import translate
from attention.ui import estimate
from attention.ui.views import experiment as view
from tests.apptest import run_page

PAGE = "pages/4_Is_sharper_better.py"
STEPS = {"sharpening": 40, "scaling": 30}
PROBE = {"sharpening": 0.02, "scaling": 0.5}    # s per step the patched probe reports


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(ex, "SHARPEN_STEPS", STEPS["sharpening"])
    monkeypatch.setattr(ex, "SCALING_STEPS", STEPS["scaling"])
    monkeypatch.setattr(ex, "EVAL_SIZE", 2048)
    monkeypatch.setenv(diskcache.ENV, str(tmp_path))       # nothing trained yet
    estimate.RATES.clear()
    probes, befores = [], []
    monkeypatch.setattr(experiment_cache, "step_seconds",
                        lambda kind, seed: probes.append(kind) or PROBE[kind])
    real_before = estimate.before
    monkeypatch.setattr(estimate, "before", lambda where, seconds, probed: (
        befores.append((seconds, probed)), real_before(where, seconds, probed)))
    yield probes, befores
    estimate.RATES.clear()


def _after(at) -> str:
    """The caption with the measured time, in English."""
    head = translate("en", "estimate.after", time="X", estimate="Y").split("X")[0]
    found = [c.value for c in at.caption if c.value.startswith(head)]
    assert len(found) == 1, [c.value for c in at.caption]
    return found[0]


def _seconds(shown: str) -> float:
    """A duration as estimate.duration writes it back into seconds."""
    m = re.fullmatch(r"(?:(\d+) min )?(\d+) s", shown)
    assert m, shown
    return int(m.group(1) or 0) * 60 + int(m.group(2))


def test_an_unshipped_seed_says_how_long_before_and_how_long_after(fresh):
    probes, befores = fresh
    assert not any(experiment_cache.stored(7).values())
    start = time.perf_counter()
    at = run_page(PAGE, sh_seed="7", timeout=600)
    wall = time.perf_counter() - start
    assert not at.exception and not at.error
    # before: each run's steps times the probe's step time and its evaluation allowance
    want = sum(STEPS[k] * PROBE[k] * experiment_cache.OVERHEAD[k] for k in STEPS)
    assert sorted(probes) == ["scaling", "sharpening"]
    assert len(befores) == 1 and befores[0][1] is True
    assert befores[0][0] == pytest.approx(want, rel=1e-9)
    # after: the measured time beside that estimate, no more than the page took
    shown = _after(at)
    m = re.fullmatch(r"Computed in \*\*(.+)\*\* \(estimated (.+)\)\.", shown)
    assert m, shown
    assert _seconds(m.group(2)) == round(want)
    assert 0 <= _seconds(m.group(1)) <= wall + 0.5
    assert all(experiment_cache.stored(7).values())           # kept for the next visitor

    # the next seed's estimate comes from this run's own rate, with no probe
    rates = {k: estimate.RATES.rate(("sharper", k)) for k in STEPS}
    assert all(r is not None and r > 0 for r in rates.values())
    at = run_page(PAGE, sh_seed="11", timeout=600)
    assert not at.exception
    assert len(probes) == 2                                   # no new probe
    assert befores[1][1] is False
    assert befores[1][0] == pytest.approx(sum(STEPS[k] * rates[k] for k in STEPS), rel=1e-9)


def test_a_trained_seed_states_no_estimate_and_times_nothing(fresh):
    probes, befores = fresh
    run_page(PAGE, sh_seed="7", timeout=600)                   # trains and stores seed 7
    at = run_page(PAGE, sh_seed="7", lang="zh", timeout=600)   # another visitor
    assert not at.exception
    assert len(befores) == 1 and len(probes) == 2             # only the first visit
    assert not [c for c in at.caption if "估计" in c.value]
    assert view.CACHE_HIT > 0
