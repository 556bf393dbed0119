#!/usr/bin/env bash
# Build (once) a separate venv in which the real vLLM-Omni thinker imports on a
# CPU-only machine, for `embedbench run --target vllm-omni` and the integration test.
#
#   scripts/vllm-omni-cpu-env.sh            # prints the venv's python on the last line
#
# Where: $EMBEDBENCH_VLLM_OMNI_VENV, else $EMBEDBENCH_CACHE/vllm-omni-cpu-venv, else
# ${XDG_CACHE_HOME:-~/.cache}/embedbench/vllm-omni-cpu-venv. Python: $PYTHON (python3).
# Idempotent: a stamp holding this script's hash (comments and log lines left out)
# marks a finished build; a second run only re-points the editable embedbench install
# at this checkout when it moved, and a changed build step rebuilds from scratch.
# Concurrent runs wait on a lock. Progress goes to stderr, one line per step.
# About 2.5 GB on disk; a fresh build took 61-87 s on the project's 2-core CI machine
# (torch from its local wheel, the rest, ~1.2 GB of wheels, from the package registry).
#
# What is in it (docs/real-code.md):
# * torch==2.13.0 first ($EMBEDBENCH_TORCH overrides the pip arguments, e.g. with an
#   --index-url of CPU wheels): where pip finds the CPU wheel (this project's machines
#   have it on disk) no CUDA build is pulled.
# * vllm 0.30.0, vllm-omni 0.30.0 and torchvision 0.28.0 with --no-deps: their full
#   dependency sets pull CUDA wheels. vLLM's CUDA extensions then fail to load, which
#   is harmless for embed_input_ids.
# * transformers 5.14.1 with its own (pure-Python) dependencies.
# * The small packages the thinker module's import chain needs, found by importing it
#   and installing what was missing until it imported, pinned exactly (--no-deps, so
#   a newer release cannot pull in anything else). Pins inside vLLM's own ranges
#   where vLLM/vLLM-Omni constrain them (fastapi, llguidance, apache-tvm-ffi, aenum).
# * embedbench itself, editable, with its runtime dependencies.
# * The torchvision workaround (tests/support/vllm_cpu_shim.py, see its docstring),
#   copied into this venv's site-packages and armed from a .pth file: it affects
#   this venv only, never the embedbench library.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${EMBEDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/embedbench}"
VENV="${EMBEDBENCH_VLLM_OMNI_VENV:-$CACHE_ROOT/vllm-omni-cpu-venv}"
PYTHON="${PYTHON:-python3}"
TORCH="${EMBEDBENCH_TORCH:-torch==2.13.0}"
SHIM_SRC="$ROOT/tests/support/vllm_cpu_shim.py"
THINKER_MODULE="vllm_omni.model_executor.models.qwen2_5_omni.qwen2_5_omni_thinker"

NO_DEPS_CORE=(
  "vllm==0.30.0"
  "vllm-omni==0.30.0"
  "torchvision==0.28.0"
)
WITH_DEPS=(
  "transformers==5.14.1"
)
# The thinker module's import chain, beyond torch and transformers' dependencies.
NO_DEPS_SMALL=(
  "aenum==3.1.16"
  "aiohappyeyeballs==2.7.1"
  "aiohttp==3.14.5"
  "aiosignal==1.4.0"
  "apache-tvm-ffi==0.1.11"
  "attrs==26.1.0"
  "cachetools==8.0.2"
  "cbor2==6.3.0"
  "charset-normalizer==3.5.3"
  "cloudpickle==3.1.3"
  "einops==0.8.2"
  "fastapi==0.136.3"
  "frozenlist==1.8.0"
  "httpx2==2.16.2"
  "llguidance==1.7.6"
  "loguru==0.7.3"
  "msgspec==0.23.0"
  "multidict==7.2.1"
  "omegaconf==2.4.0"
  "openai==3.57.0"
  "openai-harmony==0.0.8"
  "opentelemetry-api==1.45.2"
  "partial-json-parser==0.2.1.1.post7"
  "pillow==13.0.0"
  "prettytable==3.18.0"
  "prometheus_client==0.26.0"
  "propcache==0.5.4"
  "psutil==7.2.2"
  "py-cpuinfo==9.0.0"
  "pybase64==1.5.1"
  "pyzmq==27.3.0"
  "requests==2.34.2"
  "sniffio==1.3.1"
  "starlette==1.10.0"
  "tiktoken==0.14.0"
  "urllib3==2.8.0"
  "uvloop==0.23.0"
  "xgrammar==0.2.9"
  "yarl==1.25.1"
)

log() { echo "vllm-omni-cpu-env: $*" >&2; }

STAMP="$VENV/.embedbench-vllm-omni-cpu-env"
SOURCE_STAMP="$VENV/.embedbench-source"
WANT="$(grep -Ev '^[[:space:]]*(#|log )' "${BASH_SOURCE[0]}" | sha256sum | cut -d" " -f1) $TORCH"
VPY="$VENV/bin/python"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
if ! flock -n 9; then
  log "waiting for another build of $VENV to finish"
  flock 9
fi

LOG="$VENV.build.log"
# pip's output (including its long, expected list of vLLM's unmet --no-deps requirements)
# goes to $LOG; on failure its tail is shown.
pip_quiet() {
  if ! "$VPY" -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
    log "pip install $* failed; last lines of $LOG:"
    tail -n 15 "$LOG" >&2
    exit 1
  fi
}

if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
  start=$(date +%s)
  log "building the vLLM-Omni CPU venv in $VENV (about 2.5 GB, one to two minutes;"
  log "built once, then reused from this cache; pip's output goes to $LOG)"
  rm -rf "$VENV"
  : >"$LOG"
  "$PYTHON" -m venv "$VENV"
  pip_quiet --upgrade pip
  read -r -a TORCH_ARGS <<<"$TORCH"
  log "1/4 installing $TORCH"
  pip_quiet "${TORCH_ARGS[@]}"
  log "2/4 installing ${NO_DEPS_CORE[*]} (without their dependencies)"
  pip_quiet --no-deps "${NO_DEPS_CORE[@]}"
  log "3/4 installing ${WITH_DEPS[*]}"
  pip_quiet "${WITH_DEPS[@]}"
  log "4/4 installing ${#NO_DEPS_SMALL[@]} small packages of the thinker's import chain"
  pip_quiet --no-deps "${NO_DEPS_SMALL[@]}"
  rm -f "$SOURCE_STAMP"
  log "packages installed in $(( $(date +%s) - start )) s"
else
  log "using the cached vLLM-Omni CPU venv in $VENV"
fi

# Re-done when the checkout moved or its dependencies changed.
SOURCE="$ROOT $(sha256sum <"$ROOT/pyproject.toml" | cut -d" " -f1)"
if [[ ! -f "$SOURCE_STAMP" || "$(cat "$SOURCE_STAMP")" != "$SOURCE" ]]; then
  log "installing embedbench from $ROOT (editable)"
  pip_quiet -e "$ROOT"
  echo "$SOURCE" >"$SOURCE_STAMP"
fi

SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if ! cmp -s "$SHIM_SRC" "$SITE/embedbench_vllm_cpu_shim.py"; then
  cp "$SHIM_SRC" "$SITE/embedbench_vllm_cpu_shim.py"
fi
echo "import embedbench_vllm_cpu_shim; embedbench_vllm_cpu_shim.install()" \
  >"$SITE/embedbench-vllm-cpu-shim.pth"

if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
  log "checking that the thinker imports"
  if ! "$VPY" -c "import $THINKER_MODULE" >/dev/null 2>"$VENV/.import-check.log"; then
    log "the thinker does not import; last lines of $VENV/.import-check.log:"
    tail -n 5 "$VENV/.import-check.log" >&2
    exit 1
  fi
  echo "$WANT" >"$STAMP"
  log "ready ($(du -sh "$VENV" | cut -f1)), cached in $VENV for later runs"
fi
echo "$VPY"
