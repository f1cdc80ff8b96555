"""Does the model use it? Attention set against token and head importance on the loaded
model, with conclusions written from the numbers."""
from attention.ui.views.importance import draw_importance
from attention.ui.entry import page_setup

page = page_setup("nav.importance")
draw_importance(page.spec)
page.finish()
