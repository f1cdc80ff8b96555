# Two entry points for a fresh clone (Python 3.11+, make, bash):
#   make run    set up .venv and start the dashboard on http://localhost:8501
#   make test   set up .venv (+ test tools and Debian's Chromium) and run every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test bench browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

# serve.py = `streamlit run app.py` plus a warm-up thread (imports, the model, the default
# results); `streamlit run app.py` works too, without the warm-up.
run: $(VENV)/.runtime
	$(BIN)/python serve.py

browser:
	bash scripts/install_chromium.sh

test: $(VENV)/.dev browser
	$(BIN)/python -m pytest

bench: $(VENV)/.dev browser
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
