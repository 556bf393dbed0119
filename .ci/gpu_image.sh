#!/usr/bin/env bash
# A stand-in for a GPU image with another Python, for the offline dry run of
# benchmarks/gpu_check.sh (tests/test_benchmarks_smoke.py): Debian trixie's Python 3.13
# with Debian's own CPU build of torch and the scientific packages the lent H200 image
# carries (numpy, pandas, matplotlib, scipy, safetensors, tqdm, psutil as a dependency,
# pip), and, like it, neither platformdirs nor jsonschema: the dry run must pass without
# them and no .whl/, and install them from carried wheels with no network.
# python3-platformdirs comes in as a dependency of python3-fs (fonttools' optional
# filesystem layer, which nothing here imports) and is purged on every call, so an image
# built before this step lost it too; the call fails if either module still imports.
#
# Why trixie: no interpreter with a torch build is reachable for Python 3.12 from this
# project's machines (Debian ships 3.11 in bookworm and 3.13 in trixie; PyPI's cp312 torch
# is a CUDA build with a multi-GB CUDA stack). 3.13 is past 3.12, so what 3.12 removed
# (e.g. importlib.util without an explicit import) fails here too.
#
# Usage: bash .ci/gpu_image.sh DIR    (root, debootstrap; Linux)
# Builds DIR once (about 90 s and 1.9 GB; Debian's registry only) and reuses it when its
# stamp matches; prints DIR's Python version. Exit 2 when it cannot be built here.
set -euo pipefail

DIR=${1:?usage: bash .ci/gpu_image.sh DIR}
SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-pip,python3-torch,python3-numpy,python3-pandas,python3-matplotlib,python3-scipy,python3-safetensors,python3-tqdm
STAMP="$DIR/.embedbench-gpu-image"
WANT="$SUITE $PACKAGES"
ABSENT_PACKAGES="python3-platformdirs python3-jsonschema"

fail() {
    echo "gpu_image: $*" >&2
    exit 2
}

# What the H200 image lacks, removed (dpkg --force-depends: python3-fs keeps its files),
# then checked from the image's own Python.
prune() {
    local package
    for package in $ABSENT_PACKAGES; do
        if chroot "$DIR" dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed'; then
            chroot "$DIR" dpkg --purge --force-depends "$package" >/dev/null 2>&1 \
                || fail "could not remove $package from $DIR"
        fi
    done
    chroot "$DIR" python3 -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ("platformdirs", "jsonschema")))' \
        || fail "platformdirs or jsonschema still imports in $DIR; remove it (rm -rf $DIR rebuilds)"
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    prune
    chroot "$DIR" python3 --version
    exit 0
fi
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap and chroot)"
if ! command -v debootstrap >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "needs debootstrap (apt-get install debootstrap)"
    echo "gpu_image: installing debootstrap" >&2
    # A fresh machine's package lists may be missing or stale: update once, then retry.
    apt-get install -y -qq debootstrap >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq debootstrap >/dev/null; } \
        || fail "apt-get install debootstrap failed"
fi
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
echo "gpu_image: building $DIR ($SUITE, $PACKAGES); about 90 s" >&2
built=0
for attempt in 1 2; do
    if debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$DIR" "$MIRROR" \
        >"$DIR.log" 2>&1; then
        built=1
        break
    fi
    echo "gpu_image: debootstrap attempt $attempt failed: $(tail -1 "$DIR.log")" >&2
    rm -rf "$DIR"
done
[ "$built" -eq 1 ] || fail "debootstrap of $SUITE from $MIRROR failed twice; see $DIR.log"
rm -f "$DIR.log"
echo "$WANT" >"$STAMP"
prune
chroot "$DIR" python3 --version
