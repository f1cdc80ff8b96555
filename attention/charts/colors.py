"""Vega's continuous colour schemes in numpy, to draw a heatmap as an image.

A pooled overview of 2048 tokens is drawn as one image per panel (a chart of one rect per
block costs the browser ~30 us a mark), so its colours are computed here. They must be the
colours the rest of the chart uses: Vega builds a continuous scheme from a run of hex
colours, evenly spaced on [0, 1] and interpolated linearly in RGB (vega-scale's
`interpolateColors`), then rounds each channel. The runs below are Vega 6's (as bundled in
Streamlit's frontend); tests/test_colors.py checks them against vl-convert's Vega.

    rgba = colorize(values, domain=(0.0, 0.4), scheme="blues")   # (h, w) -> (h, w, 4) uint8
    url = png_data_url(rgba)                                      # "data:image/png;base64,..."
"""
from __future__ import annotations

import base64
import io
from functools import cache

import numpy as np
from PIL import Image

SCHEMES = {
    "blues": "cfe1f2bed8eca8cee58fc1de74b2d75ba3cf4592c63181bd206fb2125ca40a4a90",
    "redblue": "8c0d25bf363adf745ef4ae91fbdbc9f2efeed2e5ef9dcae15da2cb2f78b3134b85",
    "purples": "e2e1efd4d4e8c4c5e0b4b3d6a3a0cc928ec3827cb97566ae684ea25c3696501f8c",
    "oranges": "fdd8b3fdc998fdb87bfda55efc9244f87f2cf06b18e4580bd14904b93d029f3303",
}


@cache
def stops(scheme: str) -> np.ndarray:
    """(k, 3) float: the scheme's colours, 0..255, parsed once a scheme (not again for each
    figure a click draws, 25 us each); read-only, as shared."""
    run = SCHEMES[scheme]
    colours = np.array([[int(run[i + c:i + c + 2], 16) for c in (0, 2, 4)]
                        for i in range(0, len(run), 6)], dtype=np.float64)
    colours.flags.writeable = False
    return colours


def colorize(values: np.ndarray, domain: tuple[float, float], scheme: str) -> np.ndarray:
    """(h, w) values -> (h, w, 4) uint8 RGBA, as a linear Vega scale with that domain and scheme
    colours them (clamped to the domain). NaN (a block with no allowed cell) is transparent."""
    lo, hi = domain
    colours = stops(scheme)                                              # (k, 3)
    k = len(colours)
    v = np.asarray(values, dtype=np.float64)                             # (h, w)
    t = np.clip((np.nan_to_num(v, nan=lo) - lo) / ((hi - lo) or 1.0), 0.0, 1.0)
    pos = t * (k - 1)                                                    # (h, w) in [0, k-1]
    i = np.minimum(pos.astype(np.int64), k - 2)                          # left stop of each value
    f = (pos - i)[..., None]                                             # (h, w, 1) in [0, 1]
    rgb = colours[i] * (1.0 - f) + colours[i + 1] * f                    # (h, w, 3)
    alpha = np.where(np.isnan(v), 0.0, 255.0)[..., None]                 # (h, w, 1)
    return np.floor(np.concatenate([rgb, alpha], axis=-1) + 0.5).astype(np.uint8)


def png_data_url(rgba: np.ndarray) -> str:
    """An (h, w, 4) uint8 image as a PNG data URL (what a Vega image mark can show)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba), "RGBA").save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
