"""Could a stored reference of this host's quiet canary see a neighbour that never pauses?

    python benchmarks/host_reference.py --cpu-core 1              # 8 pairs of runs, ~5 min
    python benchmarks/host_reference.py --cpu-core 1 --quick      # 2 small pairs (smoke)
    python benchmarks/host_reference.py --replay DIR               # runs kept by interference.py

A neighbour that is always on leaves no quiet block half inside a run to contrast with
(``stability.neighbour_contrast`` needs idle halves), so only a level kept from earlier,
quiet runs on the same host could show it. This measures whether such a reference can
work here. Pseudo-runs of fresh processes alternate: quiet, then under a memory hog always
on (``neighbour.py`` on another core). Each process builds the default-geometry table
(152064 × 3584 bfloat16) and the kit's canary on it, pinned, and takes its reads, each
next to a compute-only pace read (BLAKE2b of 16 KiB, in L1: what the host's CPU speed
alone would change). A run's level is the median over its processes of their median
canary read (alone, and over the pace); its reference is the median of the quiet runs
before it, as a stored reference would be. For limits of 5 to 25 %, the share of hog runs
above reference × (1 + limit) against the share of quiet runs above it.

``--replay DIR`` reads default runs kept by ``interference.py --keep DIR`` instead: it
rebuilds the stored reference in their order at each of ``--limits`` (``rule``: the kit's
own limit, which follows the reference's spread) and counts the runs of each condition
that would be labelled, with every other rule as recorded.

``--quick`` (a smoke run): 2 pairs (the fewest that give a run a reference), one process
a run, 20 reads each on a table of ``QUICK_HIDDEN`` columns, the hog given 0.1 s to start
instead of 0.5 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _common as C

ROWS = 1172
PACE_BYTES = 16 * 1024
LIMITS = (0.05, 0.10, 0.15, 0.20, 0.25)
HOG = ["--on", "1", "--off", "0"]
QUICK_HIDDEN = 32


def child(core: int, reads: int, hidden: int) -> dict[str, float]:
    """In a fresh process: the median canary read and pace read (µs), pinned to ``core``,
    the canary built on a table of ``hidden`` columns (3584: the default geometry)."""
    os.sched_setaffinity(0, {core})
    import numpy as np
    import torch

    from embedbench.harness.canary import Canary

    torch.set_num_threads(1)
    table = torch.ones(C.VOCAB_7B, hidden, dtype=torch.bfloat16)
    canary = Canary(ROWS, table=table, core=core)
    payload = bytes(PACE_BYTES)
    canary_us, pace_us = [], []
    for _ in range(reads):
        canary_us.append(canary.read_us())
        start = time.perf_counter_ns()
        hashlib.blake2b(payload).digest()
        pace_us.append((time.perf_counter_ns() - start) / 1e3)
    return {"canary_us": float(np.median(canary_us)), "pace_us": float(np.median(pace_us))}


def one_process(core: int, reads: int, hidden: int) -> dict[str, float]:
    """``child`` in a new interpreter (its own heap and pages, as a worker has)."""
    cmd = [sys.executable, __file__, "--child", str(core), "--reads", str(reads)]
    cmd += ["--hidden", str(hidden)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def one_run(
    condition: str,
    core: int,
    other: int | None,
    processes: int,
    reads: int,
    hidden: int,
    hog_start_s: float = 0.5,
) -> dict:
    """``processes`` fresh processes under ``condition``; their medians and the run's level
    (the hog given ``hog_start_s`` to start)."""
    hog = None
    if condition == "hog always on" and other is not None:
        script = Path(__file__).with_name("neighbour.py")
        seconds = str(30 + 10 * processes)
        cmd = [sys.executable, str(script), "--core", str(other), *HOG, "--seconds", seconds]
        hog = subprocess.Popen(cmd)
        time.sleep(hog_start_s)
    try:
        reads_of = [one_process(core, reads, hidden) for _ in range(processes)]
    finally:
        if hog is not None:
            hog.terminate()
            hog.wait()
    canary = C.median([r["canary_us"] for r in reads_of])
    ratio = C.median([r["canary_us"] / r["pace_us"] for r in reads_of])
    return {"condition": condition, "processes": reads_of, "canary_us": canary, "ratio": ratio}


def with_references(runs: list[dict]) -> list[dict]:
    """Each run's level over the median of the quiet runs before it (None before two)."""
    for i, run in enumerate(runs):
        quiet = [r for r in runs[:i] if r["condition"] == "quiet"]
        for key in ("canary_us", "ratio"):
            ref = C.median([r[key] for r in quiet]) if len(quiet) >= 2 else None
            run[f"{key}_over_reference"] = None if ref is None else run[key] / ref - 1.0
    return runs


def detection_rows(runs: list[dict]) -> list[list]:
    """Per measure and limit: hog runs above the limit, quiet runs above it."""
    rows = []
    for key, name in (("canary_us", "canary alone"), ("ratio", "canary over pace")):
        judged = [r for r in runs if r[f"{key}_over_reference"] is not None]
        hog = [r[f"{key}_over_reference"] for r in judged if r["condition"] != "quiet"]
        quiet = [r[f"{key}_over_reference"] for r in judged if r["condition"] == "quiet"]
        for limit in LIMITS:
            caught = sum(v > limit for v in hog)
            false = sum(v > limit for v in quiet)
            rows.append(
                [name, f"{100 * limit:.0f} %", f"{caught} / {len(hog)}", f"{false} / {len(quiet)}"]
            )
    return rows


def replay(top: Path, limits: list[float | None]) -> list[list]:
    """The reference rule replayed over runs kept by ``interference.py --keep`` (in run
    order, each with its ``.condition``): at each limit (None: the kit's rule,
    ``HostReference.limit``), the store rebuilt from scratch as
    those runs would have built it, and how many runs of each condition it labels (with
    every other rule's reasons as recorded)."""
    from embedbench.harness import stability

    runs = []
    for marker in sorted(top.glob("run*.condition")):
        meta_path = marker.with_suffix("") / "metadata.json"
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        if meta.get("status") == "complete":  # a refused run never reached the rule
            runs.append((marker.read_text(), meta))
    rows = []
    for limit in limits:
        store: list[dict] = []
        labelled: dict[str, list[int]] = {}
        for condition, meta in runs:
            host = meta.get("host_stability") or {}
            others = [
                r
                for r in host.get("reasons", [])
                if not r.startswith(stability.REFERENCE_REASON_START)
            ]
            reference = stability.reference_from(store, float(meta["start_time"]))
            level = host.get("memory_level")
            over = level / reference.level - 1.0 if level and reference.level else None
            bound = reference.limit() if limit is None else limit
            slower = over is not None and over > bound
            noisy = bool(others) or slower
            tally = labelled.setdefault(condition, [0, 0, 0])
            tally[0] += 1
            tally[1] += noisy
            tally[2] += bool(slower and not others)
            replayed = {**host, "verdict": "noisy" if noisy else "stable"}
            if stability.joins_reference(replayed):
                store.append({"level": level, "time": meta.get("end_time")})
        name = "the kit's rule" if limit is None else f"{100 * limit:.0f} %"
        for condition, (n, noisy, only) in labelled.items():
            rows.append([name, condition, n, noisy, only])
    return rows


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=None, help="quiet/hog pairs of runs (default 8)")
    p.add_argument("--processes", type=int, default=None, help="per run (default 5; --quick 1)")
    p.add_argument(
        "--reads", type=int, default=None, help="canary reads a process (300; --quick 20)"
    )
    p.add_argument(
        "--hidden",
        type=int,
        default=None,
        help=f"table width (default 3584, the 7B's; --quick: {QUICK_HIDDEN})",
    )
    p.add_argument(
        "--replay",
        metavar="DIR",
        help="replay the reference rule over runs kept by interference.py --keep DIR",
    )
    p.add_argument(
        "--limits",
        default="rule,5,6,8,10",
        help="with --replay: limits in %%, or rule for the kit's own (default rule,5,6,8,10)",
    )
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    reads = args.reads or (20 if args.quick else 300)
    hidden = args.hidden or (QUICK_HIDDEN if args.quick else C.HIDDEN_7B)
    if args.child is not None:
        print(json.dumps(child(args.child, reads, hidden)))
        return
    session = C.Session("host_reference", args)
    if args.replay:
        try:
            limits = [
                None if x.strip() == "rule" else float(x) / 100
                for x in args.limits.split(",")
                if x.strip()
            ]
        except ValueError:
            print(
                f"host_reference.py: --limits {args.limits}: give per cents or rule, "
                "comma-separated, such as rule,5,10",
                file=sys.stderr,
            )
            sys.exit(2)
        headers = ["limit", "condition", "runs", "labelled noisy", "by the reference alone"]
        table = C.markdown_table(headers, replay(Path(args.replay), limits))
        note = f"Runs kept in {args.replay}, in order; every other rule's reasons as recorded."
        C.publish(session, [C.Section("The reference rule replayed", table, note)], {})
        return
    pairs = args.pairs or (2 if args.quick else 8)
    processes = args.processes or (1 if args.quick else 5)
    hog_start_s = 0.1 if args.quick else 0.5
    others = [c for c in sorted(os.sched_getaffinity(0)) if c != session.core]
    other = others[-1] if others else None
    runs = []
    for i in range(pairs):
        for condition in ("quiet", "hog always on"):
            print(f"pair {i + 1}/{pairs}: {condition} ...", file=sys.stderr, flush=True)
            runs.append(
                one_run(condition, session.core, other, processes, reads, hidden, hog_start_s)
            )
    with_references(runs)
    run_rows = [
        [
            i + 1,
            r["condition"],
            round(r["canary_us"], 1),
            round(r["ratio"], 2),
            _pct(r["canary_us_over_reference"]),
            _pct(r["ratio_over_reference"]),
        ]
        for i, r in enumerate(runs)
    ]
    headers = [
        "run",
        "condition",
        "canary (µs)",
        "canary ÷ pace",
        "canary over ref",
        "÷ pace over ref",
    ]
    note = (
        f"{processes} fresh processes a run, {reads} canary reads each, pinned to core "
        f"{session.core}; the hog on core {other}. A run's reference is the median of the "
        "quiet runs before it (none before the third run)."
        if other is not None
        else "No other allowed core: no run had its neighbour."
    )
    detect = C.markdown_table(
        ["measure", "limit", "hog runs above it", "quiet runs above it"], detection_rows(runs)
    )
    C.publish(
        session,
        [
            C.Section("Runs", C.markdown_table(headers, run_rows), note),
            C.Section("A stored reference as a rule", detect),
        ],
        {"runs": runs, "processes": processes, "reads": reads},
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f} %"


if __name__ == "__main__":
    main()
