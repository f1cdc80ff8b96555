"""Heatmap: scaled vs unscaled attention side by side, their difference, all heads, one row.

Long inputs get a pooled overview plus a full-resolution zoom window (attention/ui/views/heatmap.py).
"""
from attention.ui.entry import page_setup

page = page_setup("nav.heatmap")
from attention.ui.views.heatmap import (draw_explanation, draw_intro,  # noqa: E402  (torch:
                                        draw_spec_heatmap)             # docs/architecture.md)
spec = page.spec
draw_intro(spec)
page.view(draw_spec_heatmap, spec, key_prefix="hm")   # a view click reruns only this
draw_explanation()
page.finish()
