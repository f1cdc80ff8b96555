"""Overview images are coloured in numpy: the colours must be Vega's own for the same scale."""
import base64
import io
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from attention.charts import colors


def vega_fills(values: np.ndarray, domain: tuple[float, float], scheme: str) -> np.ndarray:
    """(k, 3): the fill Vega (vl-convert's copy) gives each value on a linear colour scale."""
    import vl_convert as vlc

    frame = pd.DataFrame({"x": range(len(values)), "v": values})
    mid = {"domainMid": 0} if scheme == "redblue" else {}
    chart = alt.Chart(frame).mark_rect().encode(
        x="x:O", color=alt.Color("v:Q", legend=None,
                                 scale=alt.Scale(scheme=scheme, domain=list(domain), **mid)))
    svg = vlc.vegalite_to_svg(chart.to_dict())
    fills = re.findall(r'fill="rgb\((\d+), (\d+), (\d+)\)"', svg)
    assert len(fills) == len(values)
    return np.array(fills, dtype=int)


@pytest.mark.parametrize("scheme,domain", [("blues", (0.0, 0.37)), ("blues", (0.0, 1.0)),
                                           ("redblue", (-0.8, 0.8)), ("redblue", (-1e-3, 1e-3)),
                                           ("purples", (0.0, 0.6)), ("oranges", (0.0, 7.5))])
def test_colours_equal_vegas_for_the_same_scale(scheme, domain):
    rng = np.random.default_rng(7)
    lo, hi = domain
    values = np.concatenate([[lo, hi, (lo + hi) / 2], rng.uniform(lo, hi, 60)])
    ours = colors.colorize(values[None, :], domain, scheme)[0]               # (k, 4)
    np.testing.assert_allclose(ours[:, :3], vega_fills(values, domain, scheme), atol=1)
    assert (ours[:, 3] == 255).all()


def test_nan_is_transparent_and_values_outside_the_domain_are_clamped():
    rgba = colors.colorize(np.array([[np.nan, -5.0, 0.0, 1.0, 9.0]]), (0.0, 1.0), "blues")[0]
    assert rgba[0, 3] == 0 and (rgba[1:, 3] == 255).all()
    assert (rgba[1] == rgba[2]).all() and (rgba[3] == rgba[4]).all()
    assert tuple(rgba[2, :3]) == (0xcf, 0xe1, 0xf2) and tuple(rgba[3, :3]) == (0x0a, 0x4a, 0x90)


def test_png_data_url_round_trips_every_pixel():
    rgba = np.random.default_rng(0).integers(0, 256, (5, 7, 4), dtype=np.uint8)
    url = colors.png_data_url(rgba)
    assert url.startswith("data:image/png;base64,")
    back = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert back.shape == (5, 7, 4) and (back == rgba).all()
