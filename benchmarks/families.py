"""Both families on their embedded defaults, side by side.

Runs ``python -m embedbench run --family F --model CACHED`` alternately for Qwen2.5-Omni
and Qwen3-Omni (ABBA order over ``--rounds``, so a drift of the machine hits both alike),
each in a fresh process with all other defaults: the cached synthetic checkpoint of each
family's published geometry (152064 × 3584 and 152064 × 2048 bf16; built first when the
cache lacks it, so no run pays for a build), the built-in replica, 1172 tokens, the PR's
design. Per family and case: the median over rounds of the baseline and fixed host
latency, the reduction, and the verdict interval's half-width, with how many runs agreed
on the verdict.

``--quick``: 1 round of a reduced design (warm-up 1, 2 blocks × 3 calls in one process), a
smoke run;
``--hidden N``: narrower tables than the published ones (for smoke runs).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import _common as C

from embedbench.omni import families as registry

# Every registered family, in the registry's order.
FAMILIES = registry.names()
CASE_ORDER = ("text", "audio", "image", "video", "mixed", "interleaved")


def _order(rounds: int) -> list[str]:
    """ABBA: the registry's order, then the reverse, and so on."""
    return [f for r in range(rounds) for f in (FAMILIES if r % 2 == 0 else FAMILIES[::-1])]


def measure(core: int, flags: list[str], rounds: int, hidden: int | None) -> list[dict[str, Any]]:
    """The runs, in ABBA order, on each family's cached synthetic checkpoint (built first
    when missing; ``hidden``: a narrower table than the published one, for smoke runs)."""
    from embedbench.omni import synthetic

    models = {
        family: synthetic.default_synthetic_checkpoint(
            hidden, family=family, progress=lambda m: print(m, file=sys.stderr, flush=True)
        )
        for family in FAMILIES
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="embedbench-families-") as tmp:
        for i, family in enumerate(_order(rounds)):
            print(f"run {i + 1}/{2 * rounds} ({family}) ...", file=sys.stderr, flush=True)
            wall, meta, summary = C.embedbench_run(
                Path(tmp) / f"run{i:02d}",
                ["--family", family, "--model", str(models[family]), *flags],
                core=core,
                label=f"{family} run",
            )
            runs.append(
                {
                    "family": family,
                    "wall_s": wall,
                    "embedding_shape": meta.get("embedding_shape"),
                    "summary": summary,
                }
            )
    return runs


def _per_case(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, list[Any]]]:
    cases: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for run in runs:
        for row in run["summary"]:
            host = row.get("host_us") or {}
            ci = row.get("reduction_ci95_pct")
            if row.get("reduction_pct") is None or not ci:
                continue
            entry = cases.setdefault((run["family"], row["case"]), {})
            entry.setdefault("baseline", []).append(host["baseline"])
            entry.setdefault("fixed", []).append(host["fixed"])
            entry.setdefault("reduction", []).append(row["reduction_pct"])
            entry.setdefault("half_width", []).append((ci[1] - ci[0]) / 2)
            entry.setdefault("verdict", []).append(row.get("verdict"))
    return cases


def tabulate(runs: list[dict[str, Any]], flags: list[str], rounds: int) -> list[C.Section]:
    """One row per family and case: medians over the rounds."""
    cases = _per_case(runs)
    rows = []
    for family in FAMILIES:
        for case in CASE_ORDER:
            entry = cases.get((family, case))
            if not entry:
                continue
            verdicts = entry["verdict"]
            common = max(set(verdicts), key=verdicts.count)
            rows.append(
                [
                    family,
                    case,
                    f"{C.median(entry['baseline']):.2f}",
                    f"{C.median(entry['fixed']):.2f}",
                    f"{C.median(entry['reduction']):.2f}",
                    f"±{C.median(entry['half_width']):.2f}",
                    f"{common} ({verdicts.count(common)}/{len(verdicts)})",
                ]
            )
    headers = ["family", "case", "before µs", "after µs", "reduction %"]
    headers += ["interval half-width (pp)", "verdict (runs agreeing)"]
    shapes = sorted({f"{r['family']}: {r['embedding_shape']}" for r in runs})
    walls = [r["wall_s"] for r in runs]
    note = (
        f"`embedbench run --family F {' '.join(flags) or '(all other defaults)'}`, "
        f"{rounds} run(s) per family in ABBA order; tables {'; '.join(shapes)}; medians "
        f"over runs; wall per run median {C.median(walls):.1f} s."
    )
    return [
        C.Section(
            f"{' and '.join(registry.get(f).label for f in FAMILIES)} on their embedded defaults",
            C.markdown_table(headers, rows, align="llrrrrl"),
            note,
        )
    ]


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=None, help="runs per family (default 2)")
    p.add_argument("--hidden", type=int, default=None, help="table width (default: published)")
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    session = C.Session("families", args)
    rounds = args.rounds or (1 if args.quick else 2)
    flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
    runs = measure(session.core, flags, rounds, args.hidden)
    C.publish(session, tabulate(runs, flags, rounds), {"runs": runs, "rounds": rounds})


if __name__ == "__main__":
    main()
