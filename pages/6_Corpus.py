"""Corpus: the corpus job's results (head statistics over many texts, one head's queries and
keys from the whole corpus in one map); attention.ui.views.corpus draws it."""
from attention.ui.entry import page_setup
from attention.ui.views.corpus import draw_corpus_page

page = page_setup("corpus.nav", needs_spec=False)
draw_corpus_page(page.spec)
page.finish()
