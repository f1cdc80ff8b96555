"""The Corpus page: a results folder of the corpus job (attention.corpus), opened, never
computed here except a small corpus run through the same job (local engine).

Folders offered: the shipped results of the bundled corpora on MiniLM (attention/data/corpus/),
the folders under the deployer's results root (config.policy().results_root, listed by
config.result_dirs, opened by config.result_dir), and this session's own job (a temporary
folder removed when the session ends). The URL keeps cp_folder, cp_stat, cp_table, cp_layer,
cp_head and cp_colour."""
from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from attention import config
from attention.charts.corpus import head_grid, qk_map
from attention.conclusions import unknown
from attention.corpus import store
from attention.errors import UserError
from attention.ui import estimate
from attention.ui.chart import place, show as draw_chart
from attention.ui.state import flag, view_widget
from attention.ui.text import lang, message, t

SHIPPED = config.DATA / "corpus"
SESSION = "session"
SESSION_KEY = "corpus_page_job"
JOB_LIMIT = 300
STATS = store.COLUMNS
COLOURS = ("kind", "position", "frequency")
TABLE_VIEW = "cp_table"   # the table of every head shown (off: a cold link draws no table)


def _options() -> dict[str, Path]:
    """Folder id (as in the URL) -> folder."""
    found = {}
    if SHIPPED.is_dir():
        for folder in sorted(SHIPPED.iterdir()):
            if store.is_result(folder):
                found[f"shipped:{folder.name}"] = folder
    for name in config.result_dirs():
        try:
            folder = config.result_dir(name)
        except UserError:
            continue
        if store.is_result(folder):
            found[f"root:{name}"] = folder
    job = st.session_state.get(SESSION_KEY)
    if job is not None and store.is_result(job.folder):
        found[SESSION] = job.folder
    return found


def _folder_label(key: str) -> str:
    kind, _, name = key.partition(":")
    if kind == "shipped":
        return t("corpus.folder_shipped", name=name)
    if kind == "root":
        return t("corpus.folder_root", name=name)
    return t("corpus.folder_session")


@st.cache_data(max_entries=16, show_spinner=False)
def _view(folder: str, name: str, stamp: float) -> pd.DataFrame | None:
    return store.view_table(Path(folder), name)


@st.cache_data(max_entries=32, show_spinner=False)
def _map(folder: str, layer: int, head: int, stamp: float) -> pd.DataFrame | None:
    return store.embedding(Path(folder), layer, head)


def _stamp(folder: Path) -> float:
    try:
        return (folder / "manifest.json").stat().st_mtime
    except OSError:
        return 0.0


def draw_corpus_page(spec=None) -> None:
    """The page; a job from it uses the sidebar's real model (`spec`), else the bundled one."""
    st.markdown(t("corpus.intro"))
    options = _options()
    _job_box(spec.model_source if spec is not None and spec.source == "pretrained"
             else config.BUNDLED)
    options = _options()
    if not options:
        st.info(t("corpus.no_folders"))
        return
    keys = list(options)
    key = view_widget("cp_folder", st.selectbox, default=keys[0], cast=str,
                      valid=lambda v: v in options, options=keys, format_func=_folder_label,
                      label=t("corpus.folder"))
    folder = options[key]
    manifest = store.manifest(folder)
    stamp = _stamp(folder)
    texts = _view(str(folder), "texts", stamp)
    summary = _view(str(folder), "summary", stamp)
    st.caption(t("corpus.about", model=_model_name(str(manifest.get("model", "?"))),
                 corpus=_corpus_name(key, manifest), texts=manifest.get("texts", 0),
                 version=manifest.get("code_version", "?")))
    pieces = _view(str(folder), "pieces", stamp)
    if pieces is not None and len(pieces):            # how much of the corpus the model reads
        found = unknown.sentence(unknown.count(pieces),
                                 _model_name(str(manifest.get("model", "?"))), "corpus")
        (st.warning if found.key != "low" else st.markdown)(found.text(lang()))
    if summary is not None and len(summary):
        _draw_stats(summary)
    if texts is not None:
        _draw_map(folder, manifest, texts, summary, stamp)


def _model_name(model: str) -> str:
    """A model by its name: a Hub id as it is, a folder by its last part alone."""
    if model.startswith(("/", ".", "~")) or "\\" in model or ":" in model[1:3]:
        return config.shown(Path(model).name or "?")
    return config.shown(model)


def _corpus_name(key: str, manifest: dict) -> str:
    """The corpus as the page names it: a bundled corpus by its name, this session's job as
    "your texts", anything else by its file name alone (a public server names no folder of
    its disk)."""
    corpus = str(manifest.get("corpus", "?"))
    if key == SESSION:
        return t("corpus.corpus_session")
    if corpus.startswith("bundled:"):
        return corpus
    return Path(corpus).name or "?"


def _draw_stats(summary: pd.DataFrame) -> None:
    st.subheader(t("corpus.stats_title"))
    st.markdown(t("corpus.stats_help", cv=store.FIXED_CV, share=store.FIXED_SHARE))
    stat = view_widget("cp_stat", st.selectbox, default="to_sep", cast=str,
                       valid=lambda v: v in STATS, options=list(STATS),
                       format_func=lambda c: t(f"model.col_{c}"), label=t("corpus.stat"))
    name = t(f"model.col_{stat}")
    ring = store.ringed(summary, stat)               # the rings follow the chosen statistic
    shown = summary.assign(ring=ring, pattern_label=[t(f"model.col_{p}")
                                                     for p in summary["pattern"]])
    labels = {k: t(f"corpus.{k}") for k in
              ("layer", "head", "mean", "lo", "hi", "cv", "pattern", "yes", "no")}
    labels["ring"] = t("corpus.ring", stat=name)
    rule = store.RING_RULE.get(stat)
    labels["title"] = t("corpus.grid_title" if rule else "corpus.grid_title_plain",
                        stat=name)
    draw_chart(head_grid(shown, stat, labels), width="stretch")
    if rule:
        st.markdown(t(f"corpus.ring_count_{rule}", ringed=int(ring.sum()), total=len(summary),
                      stat=name, share=store.FIXED_SHARE, cv=store.FIXED_CV))
    else:
        st.markdown(t("corpus.ring_none", stat=name))
    fixed = int(summary["fixed"].sum())
    st.markdown(t("corpus.fixed_count", fixed=fixed, total=len(summary),
                  varies=len(summary) - fixed, cv=store.FIXED_CV,
                  share=store.FIXED_SHARE))
    shown_table = view_widget(TABLE_VIEW, st.toggle, default=False, cast=flag,
                              label=t("corpus.show_table"), help=t("corpus.show_table_help"))
    with place():                   # the map below keeps its place when the table comes or goes
        if shown_table:
            _draw_table(summary, stat, ring, shown["pattern_label"], labels)


def _draw_table(summary: pd.DataFrame, stat: str, ring: pd.Series, patterns: pd.Series,
                labels: dict[str, str]) -> None:
    """Every head's row for `stat`: its mean over the texts, interval, variation, ring and
    pattern, and how many texts it was measured on (the grid's tooltips hold most of them)."""
    yes_no = {True: labels["yes"], False: labels["no"]}
    table = pd.DataFrame({
        labels["layer"]: summary["layer"], labels["head"]: summary["head"],
        t("corpus.texts"): summary["texts"], labels["mean"]: summary[f"{stat}_mean"],
        labels["lo"]: summary[f"{stat}_lo"], labels["hi"]: summary[f"{stat}_hi"],
        labels["cv"]: summary[f"{stat}_cv"], t("corpus.ringed"): ring.map(yes_no),
        labels["pattern"]: patterns,
        t("corpus.pattern_mean"): summary["pattern_mean"],
        t("corpus.fixed"): summary["fixed"].map(yes_no)})
    # three decimals keep every column, its header whole, inside the page's width
    numbers = {name: st.column_config.NumberColumn(format="%.3f") for name in
               (labels["mean"], labels["lo"], labels["hi"], labels["cv"],
                t("corpus.pattern_mean"))}
    st.dataframe(table, hide_index=True, height=280, width="stretch", column_config=numbers)


def _link(layer: int, head: int, model: str) -> str:
    """Model heads at this layer and head on a real model; the text is appended by the chart."""
    query = {"source": "pretrained", "layer": str(layer), "mh_tab": "heads",
             "mh_layer": str(layer), "mh_head": str(head), "lang": lang()}
    if model != config.BUNDLED:
        query["model"] = model
    return "Model_heads?" + urlencode(query) + "&text="


def _draw_map(folder: Path, manifest: dict, texts: pd.DataFrame, summary, stamp: float) -> None:
    st.subheader(t("corpus.map_title"))
    st.markdown(t("corpus.map_help"))
    layers = int(summary["layer"].max()) + 1 if summary is not None and len(summary) else 1
    heads = int(summary["head"].max()) + 1 if summary is not None and len(summary) else 1
    c1, c2, c3 = st.columns(3)
    with c1:
        layer = view_widget("cp_layer", st.selectbox, default=0, cast=int,
                            valid=lambda v: 0 <= v < layers, options=list(range(layers)),
                            label=t("corpus.layer"))
    with c2:
        head = view_widget("cp_head", st.selectbox, default=0, cast=int,
                           valid=lambda v: 0 <= v < heads, options=list(range(heads)),
                           label=t("corpus.head"))
    with c3:
        colour = view_widget("cp_colour", st.selectbox, default="kind", cast=str,
                             valid=lambda v: v in COLOURS, options=list(COLOURS),
                             format_func=lambda c: t(f"corpus.colour_{c}"),
                             label=t("corpus.colour"))
    with st.spinner(t("corpus.map_computing")):
        points = _map(str(folder), layer, head, stamp)
    if points is None:
        st.info(t("corpus.no_map"))
        return
    pieces = _view(str(folder), "pieces", stamp)
    points = points.merge(pieces[["text_id", "position", "token", "frequency"]],
                          on=["text_id", "position"], how="left")
    points = points.merge(texts[["text_id", "text"]], on="text_id", how="left")
    used = points["text_id"].nunique()
    model = manifest.get("model", config.BUNDLED)
    method = str(points["method"].iloc[0]) if "method" in points else "tsne"
    labels = {k: t(f"corpus.{k}") for k in
              ("query", "key", "kind", "position", "frequency", "token", "text")}
    labels["title"] = t("corpus.map_chart", layer=layer, head=head, n=len(points) // 2,
                        texts=used, method=t(f"corpus.method_{method}"))
    draw_chart(qk_map(points, _link(layer, head, model), colour, labels))
    st.caption(t("corpus.map_caption"))


JOB_WHAT = ("corpus", "session run")
# The job's work in units of one plain forward pass per piece: its pieces plus a start-up
# worth JOB_OVERHEAD pieces (measured on all-MiniLM-L6-v2: 5 texts of 42 pieces took 2.0 s,
# 30 of 522 took 4.7 s, a forward pass 5-8 ms per piece). It gives a server's first
# estimate; later ones use the rate of its own last job.
JOB_OVERHEAD = 300


def _expected(source: str, model, texts) -> tuple[float, bool, float]:
    """(seconds the job should take, whether a probe gave the rate, its units of work)."""
    from attention.importance.batch import forward_rate, ids_of

    units = float(sum(len(ids_of(model, text)) for text in texts) + JOB_OVERHEAD)
    rate = estimate.RATES.rate(("corpus", source))
    if rate is not None:
        return rate * units, False, units
    return forward_rate(model, texts) * units, True, units


class _Job:
    """This session's own job: a temporary folder removed when the session (this object) goes."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="attention-corpus-"))
        self.folder = self.root / "result"
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.root), True)


def _job_box(source: str) -> None:
    note = st.empty()              # the job's time: estimated before, measured after
    estimate.show(note, JOB_WHAT)
    with st.expander(t("corpus.run_title", model=Path(source).name or source)):
        st.markdown(t("corpus.run_help", limit=JOB_LIMIT))
        raw = st.text_area(t("corpus.run_texts"), key="corpus_page_texts", height=140)
        upload = st.file_uploader(t("corpus.run_upload"), key="corpus_page_upload",
                                  type=["txt", "csv", "jsonl", "parquet"])
        if not st.button(t("corpus.run_button"), key="corpus_page_go"):
            return
        from attention.text.corpora import from_upload, parse_lines

        try:
            texts = from_upload(upload.name, upload.getvalue()) if upload is not None \
                else parse_lines(raw)
        except UserError as err:
            st.error(message(err))
            return
        if not texts:
            st.warning(t("corpus.run_empty"))
            return
        old = st.session_state.pop(SESSION_KEY, None)
        if old is not None:
            old._cleanup()
        job = _Job()
        corpus = job.root / "corpus.jsonl"
        import json

        corpus.write_text("".join(json.dumps({"text": s}, ensure_ascii=False) + "\n"
                                  for s in texts), encoding="utf-8")
        from attention.corpus.compute import Settings
        from attention.corpus.job import Refused, do_job
        from attention.models import load_model

        model = load_model(source)
        seconds, probed, units = _expected(source, model, texts)
        estimate.before(note, seconds, probed)
        bar = st.progress(0.0, text=t("corpus.run_progress", done=0, total=len(texts)))
        try:
            _, took = estimate.timed(lambda: do_job(
                source, str(corpus), job.folder, model=model,
                settings=Settings(batch_size=16),
                on_progress=lambda d, n: bar.progress(
                    d / n, text=t("corpus.run_progress", done=d, total=n))))
        except (Refused, UserError) as err:
            note.empty()
            st.error(t("corpus.run_refused") if isinstance(err, Refused) else message(err))
            job._cleanup()
            return
        finally:
            bar.empty()
        estimate.RATES.record(("corpus", source), took, units)
        estimate.after(note, JOB_WHAT, took, seconds)
        st.session_state[SESSION_KEY] = job
        st.session_state["view_cp_folder"] = SESSION
        st.query_params["cp_folder"] = SESSION
