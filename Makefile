# Two entry points for a fresh machine: `make run` and `make test`.
# Both create a project-local venv (.venv) with the CPU build of torch 2.13.0
# installed first, so pip never pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.embedbench-installed

.PHONY: setup run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: run.ipynb through papermill on the embedded default, then HTML.
# JUPYTER_PATH makes "python3" the venv's kernel even if ~/.local has another.
run: setup
	JUPYTER_PATH=$(VENV)/share/jupyter $(VENV)/bin/papermill notebooks/run.ipynb out.ipynb
	JUPYTER_PATH=$(VENV)/share/jupyter $(VENV)/bin/jupyter nbconvert --to html --no-input out.ipynb
	@echo "open out.ipynb (JupyterLab) or out.html (any browser)"

test: setup
	$(PY) -m ruff check embedbench tests scripts benchmarks
	$(PY) -m ruff format --check embedbench tests scripts benchmarks
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
