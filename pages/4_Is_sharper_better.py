"""Is a higher attention score better? Train small heads live and measure: sharpening a trained
head at test time, scaled vs unscaled training as d_k grows, attention vs leave-one-out
importance. Every conclusion is written from this run's numbers."""
import streamlit as st

from attention import experiment as ex
from attention.charts import experiment as charts
from attention.ui import experiment as runs
from attention.ui.export import chart_buttons, csv_button
from attention.ui.explain import explanation
from attention.ui.layout import page_setup
from attention.ui.state import view_widget
from attention.ui.text import t

page = page_setup("nav.sharper", needs_spec=False)
lang = page.lang
st.markdown(t("sharper.intro"))

lo, hi = runs.SEED_RANGE
seed = view_widget("train_seed", st.number_input, default=0, cast=int, valid=lambda v: lo <= v <= hi,
                   label=t("sharper.seed"), min_value=lo, max_value=hi, step=1,
                   help=t("sharper.seed_help"), width=220)
study = runs.sharpening(seed)
scaling = runs.scaling(seed)
st.caption(t("sharper.cached", seed=seed))
accuracy = study.sweep.set_index("multiplier")["accuracy"].to_dict()


def section(title_key: str, caption: str, chart, name: str, conclusion: str) -> None:
    st.subheader(t(title_key))
    st.caption(caption)
    st.altair_chart(chart, width="content")
    st.info(conclusion, icon=":material/insights:")
    chart_buttons(chart, name)


section("sharper.sec_sharpen", t("sharper.sharpen_caption", eval=ex.EVAL_SIZE),
        charts.sharpening_chart(study.sweep, lang), "sharpening",
        charts.sharpening_conclusion(study.sweep, lang))
section("sharper.sec_mass", t("sharper.mass_caption"), charts.mass_chart(study.sweep, lang),
        "relevant_mass", charts.mass_conclusion(study.sweep, lang))
section("sharper.sec_sample", t("sharper.sample_caption"),
        charts.sample_chart(study.sample, lang), "sample_attention",
        charts.sample_conclusion(study.sample, accuracy, lang))
section("sharper.sec_scaling",
        t("sharper.scaling_caption", seeds=", ".join(map(str, runs.scaling_seeds(seed)))),
        charts.scaling_chart(scaling, lang), "scaling",
        charts.scaling_conclusion(scaling, lang))
section("sharper.sec_importance",
        t("sharper.importance_caption", samples=study.importance["sample"].nunique()),
        charts.importance_chart(study.importance, lang), "importance",
        charts.importance_conclusion(study.importance, study.spearman_pooled,
                                     study.spearman_within, lang))

st.subheader(t("sharper.sec_tables"))
for key, table, name in (("sharper.table_sharpen", study.sweep, "sharpening_sweep"),
                         ("sharper.table_scaling", scaling, "scaling_sweep")):
    st.caption(t(key))
    st.dataframe(table, hide_index=True, width="stretch")
    csv_button(table, f"{name}_seed{seed}")
st.caption(t("sharper.table_importance"))
csv_button(study.importance, f"importance_seed{seed}")

rel, mass, onehot, when = (t(f"sharper.tex_{k}") for k in ("relevant", "mass", "onehot", "as"))
explanation("sharper.explain", [
    ("sharper.f_task",
     rf"r_j = \mathbb{{1}}[j\ \text{{{rel}}}] + 0.3\,\varepsilon,\qquad "
     rf"e_j = \mathbb{{1}}[j\ \text{{{rel}}}]\cdot 0.5\,y + \varepsilon,\qquad y = \pm 1"),
    ("sharper.f_ceiling",
     rf"\tfrac14 \textstyle\sum_{{j\,\text{{{rel}}}}} e_j \sim \mathcal{{N}}(0.5\,y,\ 0.5^2)"
     r"\ \Rightarrow\ \Phi(1) = 0.841,\qquad e_j \sim \mathcal{N}(0.5\,y,\ 1)"
     r"\ \Rightarrow\ \Phi(0.5) = 0.691"),
    ("sharper.f_model",
     r"k_j = x_j W_K,\quad v_j = x_j W_V,\quad p = \operatorname{softmax}"
     r"\Big(\frac{q\cdot k_j}{\sqrt{d_k}}\Big),\quad \hat y = w^{\top}\textstyle\sum_j p_j v_j + b"),
    ("sharper.f_sharpen",
     r"p^{(m)}_j = \frac{\exp(m\,s_j)}{\sum_l \exp(m\,s_l)},\quad "
     r"s_j = \frac{q\cdot k_j}{\sqrt{d_k}},\qquad p^{(\infty)} = "
     rf"\text{{{onehot}}}(\arg\max_j s_j)"),
    ("sharper.f_metrics",
     r"\max_j p_j,\qquad n_{\text{eff}} = e^{H(p)},\ H(p) = -\textstyle\sum_j p_j\ln p_j,"
     rf"\qquad \text{{{mass}}} = \textstyle\sum_{{j\,\text{{{rel}}}}} p_j"),
    ("sharper.f_importance",
     r"\Delta_j = \big|\hat y(x) - \hat y(x_{\setminus j})\big|,\qquad "
     r"\rho = \operatorname{corr}\big(\operatorname{rank}(p), \operatorname{rank}(\Delta)\big)"),
    ("sharper.f_gradient",
     r"\frac{\partial p}{\partial s} = \operatorname{diag}(p) - p\,p^{\top}"
     rf"\ \longrightarrow\ 0\quad \text{{{when}}}\ p \to \text{{{onehot}}}"),
])

st.subheader(t("sharper.references"))
st.markdown(t("sharper.ref_list"))
page.finish()
