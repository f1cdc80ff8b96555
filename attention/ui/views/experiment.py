"""The "Is sharper better?" page: cached training runs, their charts, conclusions, tables and
formulas.

The runs are st.cache_data keyed on the seed (the results are small DataFrames), shared by
every session, over attention.experiment.store, which keeps them on disk: a seed trained once
is instant for everyone afterwards, across server restarts, until the code changes. The
progress bar is drawn inside the cached function, so on a cache hit Streamlit replays it as
"drawn, then emptied": nothing. The page script stays a few calls:

    draw_experiments()    # seed picker (?sh_seed=), five charts, tables and downloads
    draw_explanation()    # the formulas and the references
"""
from __future__ import annotations

import pandas as pd
import streamlit as st


from attention.conclusions import scores as conclusions

from attention.experiment import store
from attention.experiment.store import scaling_seeds
from attention.experiment.task import SharpeningStudy
from attention.charts import experiment as charts
from attention.ui import cache, estimate
from attention.charts.size import FIT_PX
from attention.ui.chart import place, show
from attention.ui.explain import explanation
from attention.ui.export import chart_buttons, csv_button
from attention.ui.state import flag, part_picker, view_widget
from attention.ui.text import lang, t
from attention.ui.views.experiment_real import VIEWS as REAL_VIEWS

SEED_RANGE = (0, 9999)
SEED_VIEW = "sh_seed"    # URL key: sh_<name> on this page (docs/architecture.md)
TABLES_VIEW = "sh_tables"   # the measured tables shown (off: a cold link draws no table)
PART_VIEW = "sh_part"     # the open part: the small trained heads, or the real models
PARTS = ("toy", "real")
CACHE_HIT = 0.05         # s: less than this, a run came from the server's memory, not training


def _with_progress(label: str, run):
    bar = st.progress(0.0, text=label)
    result = run(lambda fraction, stage: bar.progress(min(max(fraction, 0.0), 1.0), text=label))
    bar.empty()
    return result


@st.cache_data(max_entries=32, ttl="6h", show_spinner=False)
def sharpening(seed: int) -> SharpeningStudy:
    return _with_progress(t("sharper.training_head"),
                          lambda progress: store.sharpening_study(seed, progress))


@st.cache_data(max_entries=32, ttl="6h", show_spinner=False)
def scaling(seed: int) -> pd.DataFrame:
    return _with_progress(t("sharper.training_scaling"), lambda progress:
                          store.scaling_sweep(scaling_seeds(seed), progress))


def draw_experiments() -> None:
    """Train (or fetch) this seed's runs, then every chart with its conclusion, and the tables.

    The trained head (one short run) is drawn before the scaling runs start (about fifteen
    times its CPU time on a seed's first visit), so a reader has its four sections while the
    progress bar runs. Training uses one torch thread, like every computation of the UI
    (attention/ui/__init__.py)."""
    seed = pick_seed()
    note = st.empty()          # a seed that trains: its time, estimated before, measured after
    what = ("sharper", seed)
    todo = [kind for kind, kept in store.stored(seed).items() if not kept]
    steps, seconds = _expected(seed, todo, note) if todo else ({}, 0.0)
    study, took = estimate.timed(lambda: sharpening(seed))
    took = {"sharpening": took}
    st.caption(t("sharper.cached", seed=seed))
    draw_sharpening(study)
    draw_leave_one_out(study)
    sweep, took["scaling"] = estimate.timed(lambda: scaling(seed))
    trained = [kind for kind in todo if took[kind] > CACHE_HIT]   # else the server kept it
    for kind in trained:
        estimate.RATES.record(("sharper", kind), took[kind], steps[kind])
    if trained:
        estimate.after(note, what, sum(took[kind] for kind in trained), seconds)
    elif todo:
        note.empty()
    else:
        estimate.show(note, what)
    draw_scaling(seed, sweep)
    draw_tables(seed, study, sweep)


def _expected(seed: int, todo: list[str], note) -> tuple[dict[str, int], float]:
    """(training steps of each run in `todo`, seconds they should take), the estimate drawn
    into `note` before training starts: steps times the rate of the last such run on this
    server, else a few steps timed just now times a measured allowance for the evaluation
    (store.OVERHEAD)."""
    constants = store.constants()
    steps = {"sharpening": int(constants["SHARPEN_STEPS"]),
             "scaling": int(constants["SCALING_STEPS"])}
    rates = {kind: estimate.RATES.rate(("sharper", kind)) for kind in todo}
    probed = any(rate is None for rate in rates.values())
    seconds = 0.0
    for kind, rate in rates.items():
        if rate is None:
            rate = store.step_seconds(kind, seed) * store.OVERHEAD[kind]
        seconds += rate * steps[kind]
    estimate.before(note, seconds, probed)
    return steps, seconds


def pick_part() -> str:
    """The page's open part, kept in the URL as ?sh_part= (state.part_picker): the small
    heads trained here, or the real models' shipped results. Drawn together they were 12
    charts, and a cold link to the page took 2.05-2.10x a bare page's (README, performance);
    a link from before the parts that names a real-models setting opens on them."""
    real = any(name in st.query_params for name in REAL_VIEWS)
    return part_picker(PART_VIEW, PARTS, default="real" if real else "toy",
                       label=t("sharper.part"), names=lambda part: t(f"sharper.part_{part}"))


def pick_seed() -> int:
    """The training seed, kept in the URL as ?sh_seed=."""
    lo, hi = SEED_RANGE
    return view_widget(SEED_VIEW, st.number_input, default=0, cast=int,
                       valid=lambda v: lo <= v <= hi, label=t("sharper.seed"), min_value=lo,
                       max_value=hi, step=1, help=t("sharper.seed_help"), width=220)


def _section(title_key: str, caption: str, chart, name: str, conclusion: str) -> None:
    """One experiment: title, caption, chart, the conclusion written from its numbers, and the
    chart's PNG/SVG buttons."""
    st.subheader(t(title_key))
    st.caption(caption)
    show(chart, width=FIT_PX)      # a single chart fits the page; panels their columns
    st.info(conclusion, icon=":material/insights:")
    chart_buttons(chart, name, key=f"menu_{name}")    # its buttons drawn only when opened


def draw_sharpening(study: SharpeningStudy) -> None:
    """A trained head sharpened at test time: accuracy, relevant mass, and one sample's rows."""
    sweep, code = study.sweep, lang()
    accuracy = sweep.set_index("multiplier")["accuracy"].to_dict()
    eval_size = store.constants()["EVAL_SIZE"]
    _section("sharper.sec_sharpen", t("sharper.sharpen_caption", eval=eval_size),
             cache.built(charts.sharpening_panels, sweep, code), "sharpening",
             conclusions.sharpening_conclusion(sweep, code))
    _section("sharper.sec_mass", t("sharper.mass_caption"),
             cache.built(charts.mass_chart, sweep, code),
             "relevant_mass", conclusions.mass_conclusion(sweep, code))
    _section("sharper.sec_sample", t("sharper.sample_caption"),
             cache.built(charts.sample_panels, study.sample, code), "sample_attention",
             conclusions.sample_conclusion(study.sample, accuracy, code))


def draw_scaling(seed: int, sweep: pd.DataFrame) -> None:
    """Scaled against unscaled training as d_k grows, over three seeds."""
    _section("sharper.sec_scaling",
             t("sharper.scaling_caption", seeds=", ".join(map(str, scaling_seeds(seed)))),
             cache.built(charts.scaling_panels, sweep, lang()), "scaling",
             conclusions.scaling_conclusion(sweep, lang()))


def draw_leave_one_out(study: SharpeningStudy) -> None:
    """Attention weight against the leave-one-out effect, with the rank correlations."""
    _section("sharper.sec_importance",
             t("sharper.importance_caption", samples=study.leave_one_out["sample"].nunique()),
             cache.built(charts.leave_one_out_chart, study.leave_one_out, lang()), "importance",
             conclusions.leave_one_out_conclusion(study.leave_one_out, study.spearman_pooled,
                                                  study.spearman_within, lang()))


# a table's columns as the page shows them (the CSVs keep the ids)
HEADERS = {"multiplier": "axis_multiplier", "accuracy": "axis_accuracy",
           "max_weight": "axis_max_weight", "effective_tokens": "axis_effective",
           "relevant_mass": "axis_relevant_mass", "d_k": "axis_dk", "scaled": "col_variant",
           "seed": "tip_seed"}


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table with translated headers, and scaled / unscaled named instead of a flag."""
    shown = table.copy()
    if "scaled" in shown:
        shown["scaled"] = [t("sharper.variant_scaled" if s else "sharper.variant_unscaled")
                           for s in shown["scaled"]]
    return shown.rename(columns={c: t(f"sharper.{k}") for c, k in HEADERS.items()})


def draw_tables(seed: int, study: SharpeningStudy, sweep: pd.DataFrame) -> None:
    """The sharpening and scaling tables with their CSVs, and the leave-one-out CSV (its file
    keeps the page's word, importance), behind a toggle kept in the URL (?sh_tables=): every
    number is in the charts' tooltips and conclusions already."""
    st.subheader(t("sharper.sec_tables"))
    shown = view_widget(TABLES_VIEW, st.toggle, default=False, cast=flag,
                        label=t("sharper.show_tables"))
    with place():                   # the real models' charts below keep their places
        if not shown:
            return
        for key, table, name in (("sharper.table_sharpen", study.sweep, "sharpening_sweep"),
                                 ("sharper.table_scaling", sweep, "scaling_sweep")):
            st.caption(t(key))
            st.dataframe(shown_table(table), hide_index=True, width="stretch")
            csv_button(table, f"{name}_seed{seed}")
        st.caption(t("sharper.table_importance"))
        csv_button(study.leave_one_out, f"importance_seed{seed}")


def _formulas() -> list[tuple[str, str]]:
    """(interface-text key of the sentence before it, LaTeX); the words inside the formulas
    are interface text too, so they are built in the session's language."""
    rel, mass, onehot, when = (t(f"sharper.tex_{k}") for k in ("relevant", "mass", "onehot", "as"))
    return [
        ("sharper.f_task",
         rf"r_j = \mathbb{{1}}[j\ \text{{{rel}}}] + 0.3\,\varepsilon,\qquad "
         rf"e_j = \mathbb{{1}}[j\ \text{{{rel}}}]\cdot 0.5\,y + \varepsilon,\qquad y = \pm 1"),
        ("sharper.f_ceiling",
         rf"\tfrac14 \textstyle\sum_{{j\,\text{{{rel}}}}} e_j \sim \mathcal{{N}}(0.5\,y,\ 0.5^2)"
         r"\ \Rightarrow\ \Phi(1) = 0.841,\qquad e_j \sim \mathcal{N}(0.5\,y,\ 1)"
         r"\ \Rightarrow\ \Phi(0.5) = 0.691"),
        ("sharper.f_model",
         r"k_j = x_j W_K,\quad v_j = x_j W_V,\quad p = \operatorname{softmax}"
         r"\Big(\frac{q\cdot k_j}{\sqrt{d_k}}\Big),\quad "
         r"\hat y = w^{\top}\textstyle\sum_j p_j v_j + b"),
        ("sharper.f_sharpen",
         r"p^{(m)}_j = \frac{\exp(m\,s_j)}{\sum_l \exp(m\,s_l)},\quad "
         r"s_j = \frac{q\cdot k_j}{\sqrt{d_k}},\qquad p^{(\infty)} = "
         rf"\text{{{onehot}}}(\arg\max_j s_j)"),
        ("sharper.f_metrics",
         r"\max_j p_j,\qquad n_{\text{eff}} = e^{H(p)},\ H(p) = -\textstyle\sum_j p_j\ln p_j,"
         rf"\qquad \text{{{mass}}} = \textstyle\sum_{{j\,\text{{{rel}}}}} p_j"),
        ("sharper.f_importance",
         r"\Delta_j = \big|\hat y(x) - \hat y(x_{\setminus j})\big|,\qquad "
         r"\rho = \operatorname{corr}\big(\operatorname{rank}(p), "
         r"\operatorname{rank}(\Delta)\big)"),
        ("sharper.f_gradient",
         r"\frac{\partial p}{\partial s} = \operatorname{diag}(p) - p\,p^{\top}"
         rf"\ \longrightarrow\ 0\quad \text{{{when}}}\ p \to \text{{{onehot}}}"),
    ]


def draw_explanation() -> None:
    """The collapsible task, model and metric formulas, then the references."""
    explanation("sharper.explain", _formulas())
    st.subheader(t("sharper.references"))
    st.markdown(t("sharper.ref_list"))
