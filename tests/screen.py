"""What a page puts on screen as labels, read from an AppTest: every dataframe's and static
table's column headers, and every vega-lite chart's axis titles, legend titles and tooltip keys, as the
browser would show them (a channel without a title shows its field's name).

    labels(at) -> list[Shown]        Shown(kind, text, field): where it came from
    raw(shown, lang) -> bool         a raw column id on screen (snake_case, a field shown
                                     without a title, or Latin words in the Chinese interface)
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from streamlit.testing.v1 import AppTest

SNAKE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
# channels whose title a user reads (axis or legend); text/detail/order/href draw none
TITLED = ("x", "y", "x2", "y2", "color", "fill", "stroke", "size", "shape", "opacity",
          "strokeDash", "theta", "radius", "row", "column", "facet")
# Latin text a Chinese page may show: symbols, abbreviations and names every reader of the
# field uses as they are
LATIN_OK = re.compile(r"^(?:[A-Z]{2,}\d*|\[[A-Z]+\]|[A-Z]\d*|[A-Za-z]?\d+|τ|ρ|‖J‖_F|L\d+|"
                      r"[A-Z][a-z]?\d*|n|d_k|k|q|AOPC|MiniLM|BERT|SmolLM2|PCA|t-SNE|UMAP|"
                      r"ID|id)$")


@dataclass(frozen=True)
class Shown:
    kind: str          # "column", "axis", "legend", "tooltip"
    text: str
    field: str | None  # the data field it names, if any
    explicit: bool = True   # False: no title given, so the browser shows the field's id


GUIDE = {"x2": "x", "y2": "y", "theta2": "theta", "radius2": "radius"}
LEGENDS = ("color", "fill", "stroke", "size", "shape", "opacity", "strokeDash")


def _channel_title(name: str, channel) -> tuple[str, bool, Shown] | None:
    """(guide, explicit, what it shows) of one encoding channel, None when it shows nothing."""
    if not isinstance(channel, dict):
        return None
    field = channel.get("field")
    if isinstance(field, dict):
        field = None
    kind = "legend" if name in LEGENDS else "axis"
    guide = channel.get("axis" if kind == "axis" else "legend", {})
    if guide is None:                              # no axis / no legend drawn
        return None
    explicit = True
    if "title" in channel:
        title = channel["title"]
    elif isinstance(guide, dict) and "title" in guide:
        title = guide["title"]
    elif field is not None:
        explicit = False
        title = field if channel.get("aggregate") is None else \
            f"{channel['aggregate']} of {field}"
    else:
        return None
    if title is None or title == "":
        return None
    if isinstance(title, list):
        title = " ".join(str(t) for t in title)
    return GUIDE.get(name, name), explicit, Shown(kind, str(title), field, explicit)


def _tooltips(channel) -> list[Shown]:
    items = channel if isinstance(channel, list) else [channel]
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        field = item.get("field")
        title = item.get("title", field)
        if title is not None:
            out.append(Shown("tooltip", str(title), field, "title" in item))
    return out


def _merge(titles: list[tuple[str, bool, Shown]]) -> list[tuple[str, bool, Shown]]:
    """Vega-Lite's rule for layers sharing a guide: an explicit title wins over the fields'
    names; without one, every field's name is shown."""
    out = []
    for guide in dict.fromkeys(g for g, _, _ in titles):
        mine = [t for t in titles if t[0] == guide]
        explicit = [t for t in mine if t[1]]
        out.extend(explicit or mine)
    return out


def _view(spec: dict, inherited: dict, tips: list[Shown]) -> list[tuple[str, bool, Shown]]:
    """The guide titles of one view or layer stack; tooltips gathered into `tips`."""
    encoding = {**inherited, **(spec.get("encoding") or {})}
    if "layer" in spec:
        got = []
        for child in spec["layer"]:
            got.extend(_view(child, encoding, tips))
        return _merge(got)
    titles = []
    for name, channel in encoding.items():
        if name == "tooltip":
            tips.extend(_tooltips(channel))
        elif name in TITLED:
            got = _channel_title(name, channel)
            if got is not None:
                titles.append(got)
    mark = spec.get("mark")
    if isinstance(mark, dict) and mark.get("tooltip") is True:
        tips.append(Shown("tooltip", "<all fields>", None, False))
    return _merge(titles)


def chart_labels(spec: dict) -> list[Shown]:
    """Every guide title and tooltip key of a vega-lite spec (views, layers, concats)."""
    out: list[Shown] = []
    for key in ("vconcat", "hconcat", "concat"):
        for child in spec.get(key, ()):
            out.extend(chart_labels(child))
    if "spec" in spec:                                  # facet / repeat
        out.extend(chart_labels(spec["spec"]))
    if "mark" in spec or "layer" in spec:
        tips: list[Shown] = []
        out.extend(shown for _, _, shown in _view(spec, {}, tips))
        out.extend(tips)
    return out


def labels(at: AppTest) -> list[Shown]:
    out = []
    for frame in at.dataframe:
        config = json.loads(frame.proto.columns or "{}")
        for name in frame.value.columns:
            column = config.get(f"name:{name}") or config.get(str(name)) or {}
            if column.get("hidden"):
                continue
            out.append(Shown("column", str(column.get("label") or name), None))
    for table in at.table:                  # static tables: their headers as written
        out.extend(Shown("column", str(name), None) for name in table.value.columns)
    for chart in at.get("vega_lite_chart"):
        out.extend(chart_labels(json.loads(chart.proto.spec)))
    return out


def raw(shown: Shown, lang: str) -> bool:
    text = shown.text.strip()
    if SNAKE.match(text) or not shown.explicit or text == "<all fields>":
        return True
    if lang == "zh" and not re.search(r"[\u3400-\u9fff]", text):
        words = re.findall(r"[A-Za-z][A-Za-z_\-]*", text)
        return any(len(w) > 1 and not LATIN_OK.match(w) for w in words)
    return False
