"""embedbench and pyperf side by side, on pairs whose answer is known.

For each pair of ``known_pairs`` (BLAKE2b 21 against 20 hashes, an A/A pair, the
built-in replica's Audio case), ``--tries`` times, alternating the tools:

- **embedbench**: ``paired_benchmark("known_pairs:NAME", ...)`` with ``run``'s default
  design (worker processes, the between-process interval), its verdict as printed;
- **pyperf**: ``pyperf.Runner`` with its defaults (its own worker processes), both
  variants pinned to the same core (``--affinity``), then ``python -m pyperf
  compare_to``, whose "Not significant" or "faster"/"slower" is the verdict.

Per pair and tool: the share of right verdicts, every try's reading, and the median
wall time of a try (both variants). pyperf is optional (``pip install pyperf``); without
it only embedbench's side runs. ``--quick``: one try of a small design each (embedbench:
warm-up 1, 2 blocks × 3 calls in one process), a smoke run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as C
import known_pairs

__all__ = ["compare_to_verdict", "one_embedbench", "one_pyperf", "score", "table"]

HERE = Path(__file__).resolve().parent
EMBEDBENCH, PYPERF = "embedbench", "pyperf"
PYPERF_QUICK = ["--processes", "3", "--values", "2", "--warmups", "1"]
FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no detectable difference"
REFUSED = "refused"


def pyperf_available() -> bool:
    """Whether pyperf can be imported by this interpreter."""
    try:
        import pyperf  # noqa: F401
    except ImportError:
        return False
    return True


def compare_to_verdict(text: str) -> tuple[str, float | None]:
    """(verdict, reduction %) from ``pyperf compare_to BASE FIXED``'s output.

    pyperf prints "Not significant" when its t-test finds no difference, else a line
    ending "1.05x faster" or "1.05x slower" (fixed against base); the reduction is
    100 · (1 − fixed / base) from the printed means when they can be read.
    """
    means = re.findall(r"\] ([0-9.]+) (ns|us|ms|sec) \+-", text)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}
    reduction = None
    if len(means) >= 2:
        base, fixed = (float(v) * scale[u] for v, u in means[:2])
        reduction = 100.0 * (1.0 - fixed / base)
    if "Not significant" in text:
        return NO_DIFFERENCE, reduction
    if re.search(r"[0-9.]+x faster", text):
        return FASTER, reduction
    if re.search(r"[0-9.]+x slower", text):
        return SLOWER, reduction
    raise ValueError(f"pyperf compare_to printed no verdict: {text.strip()[:200]!r}")


def one_embedbench(pair: str, core: int, *, quick: bool, allow_busy: bool) -> dict[str, Any]:
    """One try of embedbench's factory path on ``pair`` (verdict ``refused`` when its
    guards refuse the host: a busy core, or a canary that stays noisy)."""
    from embedbench import RunConfig, paired_benchmark
    from embedbench.errors import ContentionError, HostNoisyError

    defaults = RunConfig()
    design = (
        C.QUICK_ONE_DESIGN
        if quick
        else {
            "warmup": defaults.warmup,
            "blocks": defaults.blocks,
            "iterations": defaults.iterations,
            "processes": defaults.processes,
        }
    )
    t0 = time.perf_counter()
    try:
        result = paired_benchmark(
            f"known_pairs:{pair}", cpu_core=core, allow_busy=allow_busy, **design
        )
    except (ContentionError, HostNoisyError) as refusal:
        return {
            "tool": EMBEDBENCH,
            "pair": pair,
            "verdict": REFUSED,
            "reduction_pct": None,
            "ci95_pct": None,
            "host_stability": None,
            "wall_s": time.perf_counter() - t0,
            "refusal": str(refusal),
        }
    wall = time.perf_counter() - t0
    low, high = result.reduction_ci95_pct
    stability = result.host_stability.verdict if result.host_stability else None
    return {
        "tool": EMBEDBENCH,
        "pair": pair,
        "verdict": result.verdict,
        "reduction_pct": result.reduction_pct,
        "ci95_pct": [low, high],
        "host_stability": stability,
        "wall_s": wall,
    }


def one_pyperf(pair: str, core: int, work: Path, *, quick: bool) -> dict[str, Any]:
    """One try of pyperf on ``pair``: both variants, then ``compare_to``."""
    files = {}
    t0 = time.perf_counter()
    for variant in ("baseline", "fixed"):
        out = work / f"{pair}-{variant}-{time.time_ns()}.json"
        cmd = [sys.executable, str(HERE / "pyperf_pair.py"), "--pair", pair]
        cmd += ["--variant", variant, "--affinity", str(core), "--quiet", "-o", str(out)]
        cmd += PYPERF_QUICK if quick else []
        subprocess.run(cmd, check=True, cwd=HERE, env=_env(), capture_output=True, text=True)
        files[variant] = out
    wall = time.perf_counter() - t0
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyperf",
            "compare_to",
            "-v",
            str(files["baseline"]),
            str(files["fixed"]),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    verdict, reduction = compare_to_verdict(compare.stdout)
    return {
        "tool": PYPERF,
        "pair": pair,
        "verdict": verdict,
        "reduction_pct": reduction,
        "ci95_pct": None,
        "host_stability": None,
        "wall_s": wall,
        "compare_to": compare.stdout.strip(),
    }


def _env() -> dict[str, str]:
    paths = [str(HERE), str(C.REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def score(tries: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (pair, tool): tries, right verdicts and the median wall time."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for t in tries:
        key = (t["pair"], t["tool"])
        row = out.setdefault(key, {"tries": 0, "right": 0, "walls": [], "readings": []})
        row["tries"] += 1
        row["right"] += t["verdict"] == known_pairs.PAIRS[t["pair"]].right_verdict
        row["walls"].append(t["wall_s"])
        row["readings"].append(_reading(t))
    return out


def _reading(t: dict[str, Any]) -> str:
    pct = "–" if t["reduction_pct"] is None else f"{t['reduction_pct']:.1f} %"
    ci = f" [{t['ci95_pct'][0]:.1f}, {t['ci95_pct'][1]:.1f}]" if t["ci95_pct"] else ""
    short = {FASTER: "faster", SLOWER: "slower", NO_DIFFERENCE: "n.s.", REFUSED: "refused"}[
        t["verdict"]
    ]
    noisy = " (noisy)" if t.get("host_stability") == "noisy" else ""
    return f"{pct}{ci} {short}{noisy}"


def table(tries: Sequence[dict[str, Any]]) -> str:
    """The markdown table of ``score``, pairs in ``known_pairs`` order."""
    scored = score(tries)
    rows = []
    for name, pair in known_pairs.PAIRS.items():
        for tool in (EMBEDBENCH, PYPERF):
            row = scored.get((name, tool))
            if row is None:
                continue
            rows.append(
                [
                    name,
                    pair.truth,
                    tool,
                    f"{row['right']} / {row['tries']}",
                    "; ".join(row["readings"]),
                    f"{C.median(row['walls']):.1f}",
                ]
            )
    headers = ["pair", "truth", "tool", "right verdicts", "each try", "wall per try (s)"]
    return C.markdown_table(headers, rows, align="lllrlr")


def run_tries(
    pairs: Sequence[str],
    tries: int,
    core: int,
    *,
    quick: bool,
    allow_busy: bool = False,
    log: Any = None,
) -> list[dict[str, Any]]:
    """Every try, tools alternating within each pair so that drift lands on both."""
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    tools = [EMBEDBENCH, *([PYPERF] if pyperf_available() else [])]
    if PYPERF not in tools:
        log("side by side: pyperf is not installed (pip install pyperf); embedbench only")
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="embedbench-side-") as tmp:
        for pair in pairs:
            for i in range(tries):
                for tool in tools if i % 2 == 0 else tools[::-1]:
                    log(f"side by side: {pair} try {i + 1}/{tries} ({tool}) ...")
                    if tool == EMBEDBENCH:
                        done.append(one_embedbench(pair, core, quick=quick, allow_busy=allow_busy))
                    else:
                        done.append(one_pyperf(pair, core, Path(tmp), quick=quick))
    return done


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--tries", type=int, default=4, help="tries per pair and tool (default 4)")
    p.add_argument(
        "--pairs",
        default=",".join(known_pairs.PAIRS),
        help=f"comma-separated pairs (default {','.join(known_pairs.PAIRS)})",
    )
    p.add_argument(
        "--allow-busy", action="store_true", help="embedbench measures a busy host (labelled)"
    )
    args = p.parse_args()
    pairs = [x for x in args.pairs.split(",") if x]
    unknown = sorted(set(pairs) - set(known_pairs.PAIRS))
    if unknown:
        p.error(f"unknown pair(s) {unknown}; choose from {sorted(known_pairs.PAIRS)}")
    session = C.Session("side_by_side", args)
    tries = run_tries(
        pairs,
        1 if args.quick else args.tries,
        session.core,
        quick=args.quick,
        allow_busy=args.allow_busy,
    )
    session.add(
        "embedbench and pyperf on known pairs",
        table(tries),
        f"Pinned to core {session.core}. Right verdicts: "
        + ", ".join(f"{k} {v.right_verdict}" for k, v in known_pairs.PAIRS.items())
        + ". pyperf's is compare_to's t-test; embedbench's its 95 % interval.",
    )
    session.data.update({"tries": tries})
    session.finish()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
