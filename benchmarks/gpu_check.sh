#!/usr/bin/env bash
# GPU check, prepared: first `embedbench probe` for Qwen2.5-Omni and Qwen3-Omni on the
# GPU (placements, lookup counts, torch.equal, device syncs per call; stops if it fails),
# then the CUDA path of embedbench on a synthetic checkpoint with the real Qwen2.5-Omni-7B
# geometry (152064 x 3584 bf16) at 1172 and 4096 tokens, the PR's design (50 warm-up
# calls, 20 blocks x 20 calls, all six cases). Prints the device, the timer floor of the
# exact timing path and the PR-format table, next to the PR's H100 table.
#
# Usage, from the repository root on a machine with a CUDA GPU and a CUDA build of torch:
#     bash benchmarks/gpu_check.sh [extra `embedbench run` flags, e.g. --cpu-core 2]
# Environment:
#     OUT                where results go (default: a new temporary directory)
#     EMBEDBENCH_CACHE   synthetic checkpoint cache (default: ${TMPDIR:-/tmp}/embedbench-gpu-check-cache;
#                        built there once, 1.09 GB, and reused by a rerun)
#     PYTHON             interpreter (default: python3)
#     GPU_CHECK_TIMEOUT  seconds allowed for the run itself (default: 270)
#     GPU_CHECK_DEVICE   cuda (default); "cpu" is a dry run of this script's own path on a
#                        machine without a GPU (for testing the script; not a GPU result)
#     GPU_CHECK_PROBE_FAMILIES  families the probe checks first (default: qwen2.5-omni qwen3-omni)
#     GPU_CHECK_PROBE_FLAGS     extra `embedbench probe` flags (tests: --hidden 64)
#
# The package is used from this checkout through PYTHONPATH. Dependencies the image lacks
# (platformdirs, jsonschema, ...) are installed from .whl/ when the checkout carries one
# (benchmarks/gpu_wheels.sh, run ahead where an index is reachable) into a temporary
# folder, offline; torch is never installed or touched. Never `make` or `pip install -e .`
# here: that would pull a multi-GB torch.
# Exit codes: 0 done; 2 no CUDA or a missing dependency (one line on stderr, nothing run);
# otherwise the exit code of `embedbench run` (124: ran past GPU_CHECK_TIMEOUT).
set -euo pipefail

PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

fail() {
    echo "gpu_check: $*" >&2
    exit 2
}

command -v "$PYTHON" >/dev/null 2>&1 || fail "no $PYTHON on PATH; set PYTHON=/path/to/python"

DEVICE=${GPU_CHECK_DEVICE:-cuda}
[ "$DEVICE" = cuda ] || [ "$DEVICE" = cpu ] || fail "GPU_CHECK_DEVICE must be cuda or cpu"

# 1. CUDA, before anything else is done.
if [ "$DEVICE" = cpu ]; then
    cuda_state="none: DRY RUN ON THE CPU (GPU_CHECK_DEVICE=cpu), not a GPU result"
else
cuda_state=$("$PYTHON" - <<'EOF' 2>&1
try:
    import torch
except Exception as exc:  # noqa: BLE001
    print(f"torch cannot be imported ({type(exc).__name__}: {exc})")
    raise SystemExit(3)
if not torch.cuda.is_available():
    build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    print(f"CUDA is not available (torch {torch.__version__}, {build}, "
          f"{torch.cuda.device_count()} device(s) visible)")
    raise SystemExit(3)
print(torch.cuda.get_device_name(0))
EOF
) || fail "$cuda_state; run this on a machine with a CUDA GPU and a CUDA build of torch"
fi

# 2. The package's dependencies. Those missing are installed from .whl/ when the checkout
# carries it (benchmarks/gpu_wheels.sh), with --no-index --no-deps into a temporary
# folder that this script removes; torch and the rest of the image are never touched.
missing_modules() {
    "$PYTHON" - <<'EOF'
import importlib.util  # by name: `import importlib` alone has no .util on Python 3.12+
mods = ["safetensors", "numpy", "pandas", "scipy", "tqdm", "platformdirs", "jsonschema",
        "matplotlib"]
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
EOF
}
missing=$(missing_modules)
deps_note="all importable from $PYTHON"
WHEELS="$ROOT/.whl"
if [ -n "$missing" ] && compgen -G "$WHEELS/*.whl" >/dev/null; then
    DEPS=$(mktemp -d -t embedbench-gpu-check-deps.XXXXXX)
    trap 'rm -rf "$DEPS"' EXIT
    # Distribution names from the wheel files; pip picks the ones for this Python.
    names=$(for w in "$WHEELS"/*.whl; do basename "$w" | cut -d- -f1; done | sort -u)
    # shellcheck disable=SC2086  # names is a word list
    "$PYTHON" -m pip install --disable-pip-version-check --quiet --no-index --no-deps \
        --find-links "$WHEELS" --target "$DEPS" $names >"$DEPS.log" 2>&1 \
        || fail "installing $missing from $WHEELS failed ($(tail -1 "$DEPS.log")); rebuild it with bash benchmarks/gpu_wheels.sh --python-version $("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    rm -f "$DEPS.log"
    export PYTHONPATH="$PYTHONPATH:$DEPS"
    deps_note="$missing installed from .whl/ (--no-index --no-deps) into a temporary folder"
    missing=$(missing_modules)
fi
if [ -n "$missing" ]; then
    fail "missing Python packages: $missing; run bash benchmarks/gpu_wheels.sh --python-version X.Y where an index is reachable and copy .whl/ here, or pip install $missing"
fi
"$PYTHON" -c "import embedbench.cli" 2>/dev/null \
    || fail "embedbench does not import from $ROOT (run: $PYTHON -c 'import embedbench.cli')"

OUT=${OUT:-$(mktemp -d -t embedbench-gpu-check.XXXXXX)}
RUN_DIR="$OUT/run"
# A rerun with the same OUT would have `embedbench run` refuse the old directory and this
# script render the old run as if new: refuse it here, before anything is written.
[ ! -e "$RUN_DIR" ] || fail "$RUN_DIR exists from an earlier check; set OUT to a new folder (or remove that one)"
mkdir -p "$OUT"
export EMBEDBENCH_CACHE=${EMBEDBENCH_CACHE:-${TMPDIR:-/tmp}/embedbench-gpu-check-cache}

# 3. The pinned core: --cpu-core when given, else the least busy allowed core over 0.5 s,
# ties going to the PR's core 2, else away from core 0 (the run's default, often busy
# with interrupts on a GPU box): benchmarks/_common.py, least_busy_core.
core_args=()
case " $* " in
    *" --cpu-core "* | *" --cpu-core="*) core_note="as given (--cpu-core)" ;;
    *)
        core=$("$PYTHON" -c 'import sys; sys.path.insert(0, "benchmarks"); import _common as C; print(C.least_busy_core(C.busy_shares(0.5)))') \
            || fail "could not sample the cores' load from /proc/stat; pass --cpu-core N"
        core_args=(--cpu-core "$core")
        core_note="$core, the least busy allowed core over 0.5 s (ties: core 2, else not 0)"
        ;;
esac
REPORT="$OUT/gpu_check.md"
TIMEOUT=${GPU_CHECK_TIMEOUT:-270}
PROBE_FAMILIES=${GPU_CHECK_PROBE_FAMILIES:-qwen2.5-omni qwen3-omni}
PROBE_FLAGS=${GPU_CHECK_PROBE_FLAGS:-}

{
    echo "### GPU check: \`bash benchmarks/gpu_check.sh $*\`"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- device (torch): $cuda_state"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "- nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | head -1)"
    fi
    echo "- host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc)"
    if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
        echo "- git: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
    else
        echo "- git: unknown (no git work tree here)"
    fi
    echo "- EMBEDBENCH_CACHE: $EMBEDBENCH_CACHE"
    echo "- pinned core: $core_note"
    echo "- dependencies: $deps_note"
    echo
} | tee "$REPORT"

# 4. The probe, for both families, before anything is timed (about 15 s on a GPU; no
# checkpoint): placements, lookup counts, torch.equal, device syncs inside one call.
for family in $PROBE_FAMILIES; do
    {
        echo "#### Probe: $family"
        echo
    } | tee -a "$REPORT"
    set +e
    # shellcheck disable=SC2086  # PROBE_FLAGS is a word list
    "$PYTHON" -m embedbench probe --device "$DEVICE" --family "$family" $PROBE_FLAGS \
        2> >(tee -a "$OUT/run.stderr" >&2) | tee -a "$REPORT"
    probe_rc=${PIPESTATUS[0]}
    set -e
    echo | tee -a "$REPORT"
    if [ "$probe_rc" -ne 0 ]; then
        echo "gpu_check: the $family probe failed (exit $probe_rc; table above); nothing was timed" >&2
        exit "$probe_rc"
    fi
done

start=$(date +%s)
set +e
timeout "$TIMEOUT" "$PYTHON" -m embedbench run --device "$DEVICE" --lengths 1172 4096 \
    --output-dir "$RUN_DIR" --no-progress "${core_args[@]}" "$@" 2> >(tee -a "$OUT/run.stderr" >&2) >"$OUT/run.stdout"
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
echo "- embedbench run: exit $rc after ${elapsed} s (synthetic build included when the cache was empty)" | tee -a "$REPORT"
if [ ! -f "$RUN_DIR/metadata.json" ] || [ "$rc" -eq 2 ]; then
    echo "gpu_check: the run wrote no results (exit $rc); see $OUT/run.stderr" >&2
    exit "$rc"
fi

"$PYTHON" - "$RUN_DIR" <<'EOF' | tee -a "$REPORT"
import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np

run = Path(sys.argv[1])
meta = json.loads((run / "metadata.json").read_text())
records = json.loads((run / "micro-raw.json").read_text())
floor = [s for r in records if r["case"] == "timer" for s in r["samples_us"]]
print(f"- device_name: {meta.get('device_name')}; cpu core {meta.get('cpu_core')}; "
      f"status {meta.get('status')}; synthetic {meta.get('synthetic')}")
print()
print("#### Timer floor (empty call through the timed path, with both device syncs)")
print()
print("| clock | median (µs) | p5 (µs) | p95 (µs) |")
print("| --- | ---: | ---: | ---: |")
for i, name in enumerate(meta["metric_order"]):
    v = np.array([s[i] for s in floor])
    p5, p50, p95 = np.percentile(v, [5, 50, 95])
    print(f"| {name} | {p50:.3f} | {p5:.3f} | {p95:.3f} |")
print()
ref = json.loads(resources.files("embedbench.report").joinpath("data/pr7477_h100.json").read_text())
print(f"#### The PR's table ({ref['environment']['gpu']}, {ref['tokens']} tokens, real checkpoint)")
print()
print("| Input | Before (μs) | After (μs) | Host latency reduction |")
print("| --- | ---: | ---: | ---: |")
for row in ref["rows"]:
    print(f"| {row['label']} | {row['before_us']:.2f} | {row['after_us']:.2f} | "
          f"{row['reduction_pct']:.2f}% |")
print()
print("#### This machine (embedbench report)")
print()
EOF
"$PYTHON" -m embedbench report "$RUN_DIR" | tee -a "$REPORT"
echo
echo "results: $RUN_DIR; this report: $REPORT"
exit "$rc"
