#!/usr/bin/env bash
# The wheels a GPU image lacks, fetched ahead on a machine with a package index, for a GPU
# box that may have no route to one: optional for benchmarks/gpu_check.sh on an image
# with torch, numpy, pandas, scipy, matplotlib, safetensors and tqdm; needed on one that
# lacks any of those.
#
# A typical CUDA image ships torch, numpy, pandas, matplotlib, safetensors, scipy and tqdm,
# all that gpu_check.sh needs. embedbench's other dependencies, platformdirs and
# jsonschema (which brings attrs, referencing, rpds-py, jsonschema-specifications and
# typing-extensions), are optional there: without jsonschema the run's files go without
# their schema check. This downloads those, plus any PACKAGE named (for an image that
# lacks more, e.g. tqdm), as binary wheels for the given Python version and the
# manylinux x86_64 platforms, into .whl/ at the repository root (git-ignored). Copy the
# checkout, .whl/ included, to the GPU box; gpu_check.sh installs from it, with --no-index
# into a temporary folder, only the wheels whose modules that Python lacks, and never
# touches torch. Never `make` or `pip install -e .` there: that would pull a multi-GB torch.
#
# Usage: bash benchmarks/gpu_wheels.sh [--python-version 3.12] [--dest DIR] [PACKAGE ...]
#   --python-version  the GPU image's Python, major.minor (default: this Python's)
#   --dest            where the wheels go (default: .whl at the repository root)
#   PACKAGE           more distributions to fetch, by name (e.g. tqdm pandas)
# Environment: PYTHON (default python3) runs pip. Exit 2 on a bad argument, else pip's code.
set -euo pipefail

PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="$ROOT/.whl"
VERSION=""
EXTRA=()

fail() {
    echo "gpu_wheels: $*" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --python-version) [ $# -ge 2 ] || fail "--python-version needs a value, e.g. 3.12"; VERSION=$2; shift 2 ;;
        --dest) [ $# -ge 2 ] || fail "--dest needs a folder"; DEST=$2; shift 2 ;;
        -h | --help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) fail "unknown option $1; usage: bash benchmarks/gpu_wheels.sh [--python-version 3.12] [--dest DIR] [PACKAGE ...]" ;;
        *)
            [[ "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail "'$1' is not a package name (letters, digits, . _ -), e.g. tqdm"
            EXTRA+=("$1"); shift ;;
    esac
done
[ -n "$VERSION" ] || VERSION=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
[[ "$VERSION" =~ ^3\.[0-9]+$ ]] || fail "--python-version must look like 3.12, got '$VERSION'"

# What embedbench needs beyond the image (pyproject.toml's dependencies minus the image's).
PACKAGES=$("$PYTHON" - "$ROOT/pyproject.toml" <<'EOF'
import re
import sys
from pathlib import Path

IMAGE = {"torch", "numpy", "pandas", "matplotlib", "safetensors", "scipy", "tqdm"}
text = Path(sys.argv[1]).read_text()
block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M).group(1)
specs = re.findall(r'"([^"]+)"', block)
print(" ".join(s for s in specs if re.split(r"[<>=!~ \[]", s)[0].lower() not in IMAGE))
EOF
)
PACKAGES="$PACKAGES${EXTRA[*]:+ ${EXTRA[*]}}"
mkdir -p "$DEST"
echo "gpu_wheels: $PACKAGES and their dependencies, Python $VERSION, manylinux x86_64 -> $DEST" >&2
# shellcheck disable=SC2086  # PACKAGES is a word list
"$PYTHON" -m pip download --disable-pip-version-check --quiet --only-binary=:all: \
    --python-version "$VERSION" --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any \
    --dest "$DEST" $PACKAGES
ls "$DEST"/*.whl | sed 's|.*/|  |' >&2
echo "gpu_wheels: done; copy $DEST with the checkout to the GPU box" >&2
