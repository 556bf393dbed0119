"""Flat against production language-model shim: what the call depth does to the saving.

Runs ``python -m embedbench run`` alternately with ``--lm-shim flat`` and ``--lm-shim
production`` (ABBA order over ``--rounds``, so a drift of the machine hits both alike),
each in a fresh process with all defaults plus any ``-- EXTRA`` flags, and reads every
``summary.json``. Per case and shim, the median over rounds of the baseline and fixed
host latency, the saving (baseline − fixed, µs) and the reduction (%), and the
production-minus-flat difference of the saving. The baseline looks up twice on
multimodal input, so a deeper language model should add about one call level's cost to
the saving there and nothing on text.

For the real classes, run it with the vLLM-Omni venv's interpreter and the target's
flags, e.g.::

    python benchmarks/lm_shim.py --python .cache/embedbench/vllm-omni-cpu-venv/bin/python \\
        -- --target vllm-omni --repo CHECKOUT --baseline-ref REF

``--quick``: 1 round of a reduced design (warm-up 1, 2 blocks × 3 calls in one process), a
smoke run.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import _common as C

SHIMS = ("flat", "production")
CASE_ORDER = ("text", "audio", "image", "video", "mixed", "interleaved")


def _one_run(python: str, out: Path, shim: str, flags: list[str], core: int) -> dict[str, Any]:
    wall, meta, summary = C.embedbench_run(
        out, ["--lm-shim", shim, *flags], core=core, label=f"{shim} run", python=python
    )
    return {
        "shim": shim,
        "wall_s": wall,
        "summary": summary,
        "embedding_class": (meta.get("target_info") or {}).get("embedding_class"),
        "target": meta.get("target"),
    }


def _order(rounds: int) -> list[str]:
    """ABBA: flat, production, production, flat, ..."""
    return [shim for r in range(rounds) for shim in (SHIMS if r % 2 == 0 else SHIMS[::-1])]


def _per_case(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, list[float]]]]:
    cases: dict[str, dict[str, dict[str, list[float]]]] = {}
    for run in runs:
        for row in run["summary"]:
            host = row.get("host_us") or {}
            if row.get("reduction_pct") is None or None in (
                host.get("baseline"),
                host.get("fixed"),
            ):
                continue
            entry = cases.setdefault(row["case"], {s: {} for s in SHIMS})[run["shim"]]
            entry.setdefault("baseline", []).append(host["baseline"])
            entry.setdefault("fixed", []).append(host["fixed"])
            entry.setdefault("saving", []).append(host["baseline"] - host["fixed"])
            entry.setdefault("reduction", []).append(row["reduction_pct"])
    return cases


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=None, help="runs per shim (default 4)")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs embedbench")
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    session = C.Session("lm_shim", args)
    rounds = args.rounds or (1 if args.quick else 4)
    flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
    runs = []
    with tempfile.TemporaryDirectory(prefix="embedbench-lm-shim-") as tmp:
        for i, shim in enumerate(_order(rounds)):
            print(f"run {i + 1}/{2 * rounds} ({shim}) ...", file=sys.stderr, flush=True)
            runs.append(_one_run(args.python, Path(tmp) / f"run{i:02d}", shim, flags, session.core))
    cases = _per_case(runs)
    rows = []
    for case in sorted(cases, key=lambda c: CASE_ORDER.index(c) if c in CASE_ORDER else 99):
        by_shim = {s: {k: C.median(v) for k, v in cases[case][s].items()} for s in SHIMS}
        if not all(by_shim[s] for s in SHIMS):
            continue
        flat, prod = by_shim["flat"], by_shim["production"]
        rows.append(
            [
                case,
                f"{flat['baseline']:.2f} / {prod['baseline']:.2f}",
                f"{flat['fixed']:.2f} / {prod['fixed']:.2f}",
                f"{flat['saving']:.2f} / {prod['saving']:.2f}",
                f"{prod['saving'] - flat['saving']:+.2f}",
                f"{flat['reduction']:.2f} / {prod['reduction']:.2f}",
            ]
        )
    table = C.markdown_table(
        [
            "case",
            "before µs (flat / production)",
            "after µs",
            "saving µs",
            "production − flat saving (µs)",
            "reduction %",
        ],
        rows,
        align="lrrrrr",
    )
    classes = sorted({f"{r['shim']}: {r['embedding_class']}" for r in runs})
    walls = [r["wall_s"] for r in runs]
    session.add(
        f"Flat against production shim, {rounds} runs each (medians over runs)",
        table,
        f"`embedbench run --lm-shim flat|production {' '.join(flags) or '(all defaults)'}`, "
        f"target {runs[0]['target']}, order ABBA; embedding classes: {'; '.join(classes)}; "
        f"wall per run median {C.median(walls):.1f} s.",
    )
    session.data.update({"runs": runs, "rounds": rounds, "flags": flags})
    session.finish()


if __name__ == "__main__":
    main()
