"""The only Streamlit code outside app.py and pages/: sidebar, URL state, caching, text."""
