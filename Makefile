# Two entry points for a fresh machine: `make run` and `make test`.
# Both create a project-local venv (.venv) with the CPU build of torch 2.13.0
# installed first, so pip never pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.embedbench-installed
# Executed notebooks and their HTML: git-ignored (under embedbench-results/), one per call.
NB_OUT ?= embedbench-results/notebooks
# Where make run's results go: one directory per run, named by the notebook's timestamp.
RESULTS ?= embedbench-results
# JUPYTER_PATH makes "python3" the venv's kernel even if ~/.local has another.
PAPERMILL := JUPYTER_PATH=$(VENV)/share/jupyter $(VENV)/bin/papermill
# Offline HTML: the lab template without require.js, MathJax or mermaid from a CDN.
NBCONVERT := JUPYTER_PATH=$(VENV)/share/jupyter $(VENV)/bin/jupyter nbconvert --to html \
	--no-input --template-file scripts/offline.html.j2
NOW = $$(date -u +%Y%m%dT%H%M%SZ)
comma := ,
space := $(subst ,, )

.PHONY: setup run report compare test test-unit lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: run.ipynb through papermill on the embedded default, then HTML. The
# notebook and the results directory share one timestamp; the last line is the results.
run: setup
	@mkdir -p $(NB_OUT)
	@stamp=$(NOW); nb=$(NB_OUT)/run-$$stamp; results=$(RESULTS)/$$stamp; set -ex; \
	$(PAPERMILL) notebooks/run.ipynb $$nb.ipynb -p output_dir "$$results"; \
	$(NBCONVERT) $$nb.ipynb; \
	set +x; echo "open $$nb.ipynb (JupyterLab) or $$nb.html (any browser)"; \
	echo "results: $$results"

# Re-render an existing run: make report DIR=embedbench-results/UTC-TIME (default: newest).
# A DIR is checked first, with embedbench validate's one line, as compare's dirs are.
report: setup
	@$(if $(DIR),$(PY) -m embedbench validate "$(DIR)" >/dev/null || exit 2)
	@mkdir -p $(NB_OUT)
	@nb=$(NB_OUT)/report-$(NOW); set -ex; \
	$(PAPERMILL) notebooks/report.ipynb $$nb.ipynb $(if $(DIR),-p results_dir "$(DIR)"); \
	$(NBCONVERT) $$nb.ipynb; \
	set +x; echo "open $$nb.ipynb (JupyterLab) or $$nb.html (any browser)"

# Side by side: make compare DIRS="RESULTS_DIR OTHER_RESULTS_DIR" (with the PR's table).
# Each dir is checked first, with embedbench validate's one line: papermill never starts
# on a dir that is not a run's results.
compare: setup
	@test -n "$(strip $(DIRS))" || { echo 'usage: make compare DIRS="DIR1 DIR2"' >&2; exit 2; }
	@for dir in $(DIRS); do $(PY) -m embedbench validate "$$dir" >/dev/null || exit 2; done
	@mkdir -p $(NB_OUT)
	@nb=$(NB_OUT)/compare-$(NOW); set -ex; \
	$(PAPERMILL) notebooks/compare.ipynb $$nb.ipynb \
		-y "results_dirs: [$(subst $(space),$(comma) ,$(patsubst %,'%',$(strip $(DIRS))))]"; \
	$(NBCONVERT) $$nb.ipynb; \
	set +x; echo "open $$nb.ipynb (JupyterLab) or $$nb.html (any browser)"

# Everything (CI): ruff, then every tier over two processes (pytest-xdist), including the
# vLLM-Omni CPU venv's integration tests (the first time, a 2.5 GB venv is built in the
# cache; progress goes to stderr).
test: setup lint
	$(PY) -m pytest -q -n 2 --dist loadscope

# The fast tier: ruff and the unit tests over two processes (no run of the harness; about a minute).
test-unit: setup lint
	$(PY) -m pytest -q -m unit -n 2 --dist loadscope

lint: setup
	$(PY) -m ruff check embedbench tests scripts benchmarks
	$(PY) -m ruff format --check embedbench tests scripts benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
