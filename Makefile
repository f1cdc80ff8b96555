# Two entry points for a fresh clone (Python 3.11+, make, bash):
#   make run    set up .venv and start the dashboard on http://localhost:8501
#   make test   set up .venv (+ test tools and Debian's Chromium) and run every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test bench bench-quick browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

# The app's first page run starts its warm-up (imports, the model, the default results).
run: $(VENV)/.runtime
	ATTENTION_EXPLORER_LOCAL_MODELS=1 $(BIN)/python -m streamlit run app.py

browser:
	bash scripts/install_chromium.sh

test: $(VENV)/.dev browser
	$(BIN)/python -m pytest

# Every benchmark at full size (10-20 min; ratios against baselines run alongside).
bench: $(VENV)/.dev browser
	$(BIN)/python -m bench

# Every benchmark on small sizes (about 2 min on 2 cores): ratios printed, not held.
bench-quick: $(VENV)/.dev browser
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
