"""Is sharper attention a better model, on a real causal LM over a whole corpus: per text and
setting, the mean negative log-likelihood per predicted piece and how sharp the attention was.

    settings.py   the settings (scale variants, temperatures, sinks, head ablations), no torch
    engine.py     one batch of texts under many settings, sharing the unmodified prefix
    stats.py      paired bootstrap over texts against the unmodified model, no torch
    store.py      the shipped per-text results (attention/data/sweeps), read without torch
    sentence.py   a sentence model under the same settings: paraphrase retrieval per pair
    pairs.py      its settings, paired bootstrap over pairs and shipped files, no torch

The corpus job computes the per-text rows (`python -m attention.corpus run --what nll`) and
ships them (attention/corpus/ship.py); ship.py here derives the page's tables and ships the
sentence model's per-pair rows (`python -m attention.corpus ship --pairs bundled:en`).
Nothing here imports the corpus job: it sits above the measures it runs."""

__all__: list[str] = []   # import its modules: sweeps.<module>
