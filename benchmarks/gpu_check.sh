#!/usr/bin/env bash
# GPU check, prepared: first `embedbench probe` for Qwen2.5-Omni and Qwen3-Omni on the
# GPU (placements, lookup counts, torch.equal, the syncs torch reports per call; stops if
# it fails), then the CUDA path of embedbench on a synthetic checkpoint with the real
# Qwen2.5-Omni-7B geometry (152064 x 3584 bf16) at 1172 and 4096 tokens, the PR's design
# (50 warm-up calls, 20 blocks x 20 calls, all six cases). Prints the device, the timer
# floor of the exact timing path, the SM clock and syncs per case, and the PR-format
# table next to the PR's H100 table. Every step prints its elapsed seconds.
#
# Usage, from the repository root on a machine with a CUDA GPU and a CUDA build of torch:
#     bash benchmarks/gpu_check.sh [extra `embedbench run` flags, e.g. --cpu-core 2]
# Environment:
#     OUT                where results go (default: a new temporary directory); at most
#                        7 files: gpu_check.md, run.stdout, run.stderr, run/*.json
#     EMBEDBENCH_CACHE   synthetic checkpoint cache (default: ${TMPDIR:-/tmp}/embedbench-gpu-check-cache;
#                        built there once, 1.09 GB, and reused by a rerun)
#     PYTHON             interpreter (default: python3)
#     GPU_CHECK_TIMEOUT        seconds allowed for `embedbench run` (default: 270)
#     GPU_CHECK_PROBE_TIMEOUT  seconds allowed for each family's probe (default: 120)
#     GPU_CHECK_STEP_TIMEOUT   seconds allowed for each other Python step: the CUDA check,
#                              the dependency check, the core pick, the report (default: 60)
#     GPU_CHECK_DEVICE   cuda (default); "cpu" is a dry run of this script's own path on a
#                        machine without a GPU (for testing the script; not a GPU result)
#     GPU_CHECK_PROBE_FAMILIES  families the probe checks first (default: every registered one)
#     GPU_CHECK_PROBE_FLAGS     extra `embedbench probe` flags (tests: --hidden 64)
#
# The package is used from this checkout through PYTHONPATH. It needs the image's torch,
# safetensors, numpy, pandas, scipy, tqdm and matplotlib; platformdirs and jsonschema are
# optional here (without jsonschema the run's files go unchecked, and gpu_check.md says
# so). When the checkout carries .whl/ (benchmarks/gpu_wheels.sh, run ahead where an index
# is reachable), the wheels whose modules this Python lacks, and only those, are
# installed offline into a temporary folder: the image's own packages are never shadowed,
# torch is never installed or touched. Never `make` or `pip install -e .` here: that
# would pull a multi-GB torch.
# Exit codes: 0 done; 2 no CUDA, a missing dependency or a bad setting (one line on
# stderr, nothing run); 124 a step ran past its timeout (one line names it); otherwise
# the exit code of a failed probe or of `embedbench run`.
set -euo pipefail

PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

fail() {
    echo "gpu_check: $*" >&2
    exit 2
}

# Elapsed time of a step: since START_NS, in tenths of a second.
clock_ns() { date +%s%N; }
since() {
    local tenths=$((($(clock_ns) - $1) / 100000000))
    echo "$((tenths / 10)).$((tenths % 10)) s"
}
CHECK_START=$(clock_ns)

command -v "$PYTHON" >/dev/null 2>&1 || fail "no $PYTHON on PATH; set PYTHON=/path/to/python"
command -v timeout >/dev/null 2>&1 || fail "no timeout on PATH (GNU coreutils); install coreutils"

DEVICE=${GPU_CHECK_DEVICE:-cuda}
[ "$DEVICE" = cuda ] || [ "$DEVICE" = cpu ] || fail "GPU_CHECK_DEVICE must be cuda or cpu"
TIMEOUT=${GPU_CHECK_TIMEOUT:-270}
PROBE_TIMEOUT=${GPU_CHECK_PROBE_TIMEOUT:-120}
STEP_TIMEOUT=${GPU_CHECK_STEP_TIMEOUT:-60}
for setting in GPU_CHECK_TIMEOUT=$TIMEOUT GPU_CHECK_PROBE_TIMEOUT=$PROBE_TIMEOUT \
    GPU_CHECK_STEP_TIMEOUT=$STEP_TIMEOUT; do
    [[ "${setting#*=}" =~ ^[1-9][0-9]*$ ]] \
        || fail "${setting%%=*} must be a whole number of seconds, got '${setting#*=}'"
done

# A command under a time limit (SIGTERM, then SIGKILL 10 s later for one that hangs in
# a driver call); 124 or 137 means it ran past the limit.
limited() {
    local seconds=$1
    shift
    timeout -k 10 "$seconds" "$@"
}
timed_out() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
stopped() {  # a step that timed out: say which, and stop with 124
    echo "gpu_check: $1 timed out after $2 s ($3); $4" >&2
    exit 124
}

# 1. CUDA, before anything else is done.
step=$(clock_ns)
if [ "$DEVICE" = cpu ]; then
    cuda_state="none: DRY RUN ON THE CPU (GPU_CHECK_DEVICE=cpu), not a GPU result"
else
set +e
cuda_state=$(limited "$STEP_TIMEOUT" "$PYTHON" - <<'EOF' 2>&1
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
)
cuda_rc=$?
set -e
if timed_out "$cuda_rc"; then
    stopped "the CUDA check (import torch, the first CUDA call)" "$STEP_TIMEOUT" \
        GPU_CHECK_STEP_TIMEOUT "nothing was run"
fi
[ "$cuda_rc" -eq 0 ] || fail "$cuda_state; run this on a machine with a CUDA GPU and a CUDA build of torch"
fi
cuda_s=$(since "$step")

# 2. The package's dependencies: those the measuring path needs, and two optional ones.
# From .whl/ (benchmarks/gpu_wheels.sh), only the wheels whose modules are missing here
# are installed, --no-index --no-deps, into a temporary folder that this script removes.
step=$(clock_ns)
REQUIRED="safetensors numpy pandas scipy tqdm matplotlib"
OPTIONAL="platformdirs jsonschema"
missing_of() {
    limited "$STEP_TIMEOUT" "$PYTHON" - "$@" <<'EOF'
import importlib.util  # by name: `import importlib` alone has no .util on Python 3.12+
import sys

print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
EOF
}
# Two lines: the distributions in .whl/ with a module this Python lacks, then the others.
wheels_needed() {
    limited "$STEP_TIMEOUT" "$PYTHON" - "$1" <<'EOF'
import importlib.util
import sys
import zipfile
from pathlib import Path


def modules(wheel: Path) -> set[str]:
    """Top-level modules of a wheel: pkg/, mod.py, mod.cpython-312-x86_64-linux-gnu.so."""
    with zipfile.ZipFile(wheel) as archive:
        heads = {name.split("/")[0] for name in archive.namelist()}
    return {
        head.split(".")[0]
        for head in heads
        if head and not head.endswith((".dist-info", ".data", ".pth"))
    }


lacking: dict[str, bool] = {}
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    name = wheel.name.split("-")[0]
    absent = any(importlib.util.find_spec(m) is None for m in modules(wheel))
    lacking[name] = lacking.get(name, False) or absent
print(" ".join(name for name, absent in lacking.items() if absent))
print(" ".join(name for name, absent in lacking.items() if not absent))
EOF
}
# A dependency step's exit code: past its limit, the check stops naming it (124); any
# other failure is one line, exit 2.
dependency_check() {
    local rc=$1
    if timed_out "$rc"; then
        stopped "the dependency check" "$STEP_TIMEOUT" GPU_CHECK_STEP_TIMEOUT "nothing was run"
    fi
    [ "$rc" -eq 0 ] || fail "the dependency check failed (exit $rc) under $PYTHON"
}
set +e
# shellcheck disable=SC2086  # word lists
missing=$(missing_of $REQUIRED $OPTIONAL)
rc=$?
set -e
dependency_check "$rc"
WHEELS="$ROOT/.whl"
if [ -z "$missing" ]; then
    wheels_note="nothing installed"
elif ! compgen -G "$WHEELS/*.whl" >/dev/null; then
    wheels_note="no .whl/ carried, nothing installed"
else
    wheels_note="no wheel in .whl/ provides what is missing, nothing installed"
    set +e
    needed=$(wheels_needed "$WHEELS")
    rc=$?
    set -e
    dependency_check "$rc"
    install=$(sed -n 1p <<<"$needed")
    kept=$(sed -n 2p <<<"$needed")
    if [ -n "$install" ]; then
        DEPS=$(mktemp -d -t embedbench-gpu-check-deps.XXXXXX)
        trap 'rm -rf "$DEPS"' EXIT
        # shellcheck disable=SC2086  # install is a word list; pip picks each for this Python
        limited "$STEP_TIMEOUT" "$PYTHON" -m pip install --disable-pip-version-check --quiet \
            --no-index --no-deps --find-links "$WHEELS" --target "$DEPS" $install >"$DEPS.log" 2>&1 \
            || fail "installing $install from $WHEELS failed ($(tail -1 "$DEPS.log")); rebuild it with bash benchmarks/gpu_wheels.sh --python-version $("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        rm -f "$DEPS.log"
        export PYTHONPATH="$PYTHONPATH:$DEPS"
        wheels_note="installed from .whl/ (--no-index --no-deps) into a temporary folder: $install"
    fi
    [ -z "$kept" ] || wheels_note="$wheels_note; not installed from .whl/, this Python has them: $kept"
    set +e
    # shellcheck disable=SC2086  # word lists
    missing=$(missing_of $REQUIRED $OPTIONAL)
    rc=$?
    set -e
    dependency_check "$rc"
fi
required_missing=$(for m in $missing; do case " $REQUIRED " in *" $m "*) echo "$m" ;; esac; done | xargs)
optional_missing=$(for m in $missing; do case " $OPTIONAL " in *" $m "*) echo "$m" ;; esac; done | xargs)
if [ -n "$required_missing" ]; then
    version=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    fail "missing Python packages: $required_missing; run bash benchmarks/gpu_wheels.sh --python-version $version $required_missing where an index is reachable and copy .whl/ here, or pip install $required_missing"
fi
set +e
limited "$STEP_TIMEOUT" "$PYTHON" -c "import embedbench.cli" 2>/dev/null
rc=$?
set -e
if timed_out "$rc"; then
    stopped "importing embedbench" "$STEP_TIMEOUT" GPU_CHECK_STEP_TIMEOUT "nothing was run"
fi
[ "$rc" -eq 0 ] || fail "embedbench does not import from $ROOT (run: $PYTHON -c 'import embedbench.cli')"
optional_note=""
case " $optional_missing " in
    *" platformdirs "*) optional_note="platformdirs absent (not needed: the cache is EMBEDBENCH_CACHE)" ;;
esac
case " $optional_missing " in
    *" jsonschema "*) optional_note="${optional_note:+$optional_note; }jsonschema absent (the run's files go without their schema check: see schema check below)" ;;
esac
deps_note="$REQUIRED importable from $PYTHON; ${optional_note:-platformdirs and jsonschema importable}; $wheels_note"
deps_s=$(since "$step")

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
step=$(clock_ns)
core_args=()
case " $* " in
    *" --cpu-core "* | *" --cpu-core="*) core_note="as given (--cpu-core)" ;;
    *)
        set +e
        core=$(limited "$STEP_TIMEOUT" "$PYTHON" -c 'import sys; sys.path.insert(0, "benchmarks"); import _common as C; print(C.least_busy_core(C.busy_shares(0.5)))')
        rc=$?
        set -e
        if timed_out "$rc"; then
            stopped "the core pick" "$STEP_TIMEOUT" GPU_CHECK_STEP_TIMEOUT "nothing was timed"
        fi
        [ "$rc" -eq 0 ] || fail "could not sample the cores' load from /proc/stat; pass --cpu-core N"
        core_args=(--cpu-core "$core")
        core_note="$core, the least busy allowed core over 0.5 s (ties: core 2, else not 0)"
        ;;
esac
core_s=$(since "$step")
REPORT="$OUT/gpu_check.md"
if [ -n "${GPU_CHECK_PROBE_FAMILIES:-}" ]; then
    PROBE_FAMILIES=$GPU_CHECK_PROBE_FAMILIES
else  # the registry's families, in its order
    PROBE_FAMILIES=$(limited "$STEP_TIMEOUT" "$PYTHON" -c 'from embedbench.omni import families; print(*families.names())') ||
        fail "could not list the families (embedbench.omni.families)"
fi
PROBE_FLAGS=${GPU_CHECK_PROBE_FLAGS:-}

{
    echo "### GPU check: \`bash benchmarks/gpu_check.sh $*\`"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- device (torch): $cuda_state ($cuda_s)"
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
    echo "- pinned core: $core_note ($core_s)"
    echo "- dependencies: $deps_note ($deps_s)"
    echo
} | tee "$REPORT"

# 4. The probe, for both families, before anything is timed (about 15 s on a GPU; no
# checkpoint): placements, lookup counts, torch.equal, the syncs torch reports in a call.
for family in $PROBE_FAMILIES; do
    {
        echo "#### Probe: $family"
        echo
    } | tee -a "$REPORT"
    step=$(clock_ns)
    set +e
    # shellcheck disable=SC2086  # PROBE_FLAGS is a word list
    limited "$PROBE_TIMEOUT" "$PYTHON" -m embedbench probe --device "$DEVICE" --family "$family" \
        $PROBE_FLAGS 2> >(tee -a "$OUT/run.stderr" >&2) | tee -a "$REPORT"
    probe_rc=${PIPESTATUS[0]}
    set -e
    { echo; echo "- probe $family: exit $probe_rc ($(since "$step"))"; echo; } | tee -a "$REPORT"
    if timed_out "$probe_rc"; then
        stopped "the $family probe" "$PROBE_TIMEOUT" GPU_CHECK_PROBE_TIMEOUT "nothing was timed"
    fi
    if [ "$probe_rc" -ne 0 ]; then
        echo "gpu_check: the $family probe failed (exit $probe_rc; table above); nothing was timed" >&2
        exit "$probe_rc"
    fi
done

# 5. The run.
step=$(clock_ns)
set +e
limited "$TIMEOUT" "$PYTHON" -m embedbench run --device "$DEVICE" --lengths 1172 4096 \
    --output-dir "$RUN_DIR" --no-progress "${core_args[@]}" "$@" 2> >(tee -a "$OUT/run.stderr" >&2) >"$OUT/run.stdout"
rc=$?
set -e
echo "- embedbench run: exit $rc ($(since "$step"); the synthetic build included when the cache was empty)" | tee -a "$REPORT"
if timed_out "$rc"; then
    echo "gpu_check: embedbench run timed out after $TIMEOUT s (GPU_CHECK_TIMEOUT); what it finished is in $RUN_DIR" >&2
fi
if [ ! -f "$RUN_DIR/metadata.json" ] || [ "$rc" -eq 2 ]; then
    echo "gpu_check: the run wrote no results (exit $rc); see $OUT/run.stderr" >&2
    exit "$rc"
fi

# 6. What `embedbench report` does not print (benchmarks/gpu_check_report.py), then it.
step=$(clock_ns)
set +e
limited "$STEP_TIMEOUT" "$PYTHON" benchmarks/gpu_check_report.py "$RUN_DIR" | tee -a "$REPORT"
render_rc=${PIPESTATUS[0]}
render_s=$(since "$step")
step=$(clock_ns)
limited "$STEP_TIMEOUT" "$PYTHON" -m embedbench report "$RUN_DIR" | tee -a "$REPORT"
report_rc=${PIPESTATUS[0]}
set -e
echo | tee -a "$REPORT"
echo "- gpu_check_report.py: exit $render_rc ($render_s); embedbench report: exit $report_rc ($(since "$step")); the whole check: $(since "$CHECK_START")" | tee -a "$REPORT"
for part in "gpu_check_report.py:$render_rc" "embedbench report:$report_rc"; do
    if timed_out "${part##*:}"; then
        stopped "${part%:*}" "$STEP_TIMEOUT" GPU_CHECK_STEP_TIMEOUT "the run's results are in $RUN_DIR"
    fi
done
echo
echo "results: $RUN_DIR; this report: $REPORT"
# The run's exit code; after a clean run, the first failing report step's.
for part_rc in "$render_rc" "$report_rc"; do
    if [ "$rc" -eq 0 ] && [ "$part_rc" -ne 0 ]; then rc=$part_rc; fi
done
exit "$rc"
