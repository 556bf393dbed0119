"""Workers against one process: do worker processes read what one process reads, and do
a worker's first calls stall?

Runs ``python -m embedbench run`` in alternating pairs: the default worker processes
against ``--processes 1``, the same design otherwise (plus any ``-- EXTRA`` flags), the
order of each pair swapped from one pair to the next. Then, from every run's raw records
(host-observed µs per call):

- **levels**: per case and variant, each run's level is the median of its per-block
  medians. Per pair, the log ratio workers ÷ one process; its mean over pairs with a t
  interval, beside the between-run noise (the SD of the log level over runs of each mode,
  pooled). The modes agree when the mean ratio lies within that noise;
- **position**: in the workers' runs, each worker's per-block medians over its run's
  level, by position (first, middle, last worker): the mean over runs with a t interval;
- **stalls**: calls over 5x their block's median, in each worker's first timed block
  against its other blocks (and the blocks with any page fault);
- **the parent**: what the run's parent did while each worker measured
  (``parent_while_measuring`` in metadata.json): CPU seconds, bytes written, bytes read
  besides the event pipe.

``--quick``: 2 pairs of a reduced design, a smoke run. ``--from DIR``: analyse the pairs
kept earlier with ``--keep DIR``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as C

MODES = ("workers", "single")
SINGLE_FLAGS = ["--processes", "1"]
STALL_FACTOR = 5.0
CASE_ORDER = ("text", "audio", "image", "video", "mixed", "interleaved")


# --------------------------------------------------------------------------- reading runs


def _load_run(where: Path) -> dict[str, Any]:
    """What the analysis reads of one kept run: its metadata and timed records."""
    meta = json.loads((where / "metadata.json").read_text())
    records = json.loads((where / "micro-raw.json").read_text())
    timed = [r for r in records if r["case"] != "timer" and r.get("samples_us")]
    return {"dir": str(where), "metadata": meta, "records": timed}


def _kept_pairs(top: Path) -> list[dict[str, dict[str, Any]]]:
    pairs = []
    for workers in sorted(top.glob("pair*-workers")):
        single = workers.with_name(workers.name.replace("-workers", "-single"))
        if (workers / "micro-raw.json").is_file() and (single / "micro-raw.json").is_file():
            pairs.append({"workers": _load_run(workers), "single": _load_run(single)})
    if not pairs:
        print(
            f"worker_position: no kept pairs (pair*-workers, pair*-single) under {top}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return pairs


def _block_medians(records: Sequence[dict[str, Any]]) -> dict[tuple, float]:
    """(case, variant, worker, block) -> the median host-observed µs of that block."""
    return {
        (r["case"], r["variant"], r.get("worker", 0), r["block"]): statistics.median(
            s[0] for s in r["samples_us"]
        )
        for r in records
    }


def run_levels(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(case, variant) -> the median of the run's per-block medians."""
    by_key: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (case, variant, _worker, _block), value in _block_medians(records).items():
        by_key[(case, variant)].append(value)
    return {key: statistics.median(values) for key, values in by_key.items()}


def _t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of a 95 % t interval (the mean alone for fewer than 2 values)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan, math.nan
    from scipy import stats as sps

    half = float(sps.t.ppf(0.975, len(values) - 1)) * C.sd(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def _pct(log_ratio: float) -> float:
    return 100.0 * (math.exp(log_ratio) - 1.0)


# --------------------------------------------------------------------------- analyses


def level_rows(pairs: Sequence[dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per case and variant: workers ÷ one process, against the between-run noise."""
    levels = [{mode: run_levels(p[mode]["records"]) for mode in MODES} for p in pairs]
    keys = sorted(
        set.intersection(*(set(lv["workers"]) & set(lv["single"]) for lv in levels)),
        key=lambda k: (CASE_ORDER.index(k[0]) if k[0] in CASE_ORDER else 99, k[1]),
    )
    rows = []
    for key in keys:
        ratios = [math.log(lv["workers"][key] / lv["single"][key]) for lv in levels]
        noise = [C.sd([math.log(lv[mode][key]) for lv in levels]) for mode in MODES]
        pooled = math.sqrt(sum(n * n for n in noise) / len(noise))
        mean, low, high = _t_interval(ratios)
        rows.append(
            {
                "case": key[0],
                "variant": key[1],
                "workers_us": statistics.median(lv["workers"][key] for lv in levels),
                "single_us": statistics.median(lv["single"][key] for lv in levels),
                "ratio_pct": _pct(mean),
                "ratio_ci_pct": [_pct(low), _pct(high)],
                "between_run_sd_pct": 100.0 * pooled,
                "agree": abs(mean) <= pooled,
            }
        )
    return rows


def _position(worker: int, workers: int) -> str:
    if worker == 0:
        return "first"
    return "last" if worker == workers - 1 else "middle"


def position_rows(pairs: Sequence[dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per worker position: its per-block medians over its run's level, mean over runs."""
    by_position: dict[str, list[float]] = defaultdict(list)
    for pair in pairs:
        run = pair["workers"]
        workers = int(run["metadata"].get("processes") or 1)
        levels = run_levels(run["records"])
        per_run: dict[str, list[float]] = defaultdict(list)
        for (case, variant, worker, _block), value in _block_medians(run["records"]).items():
            per_run[_position(worker, workers)].append(math.log(value / levels[(case, variant)]))
        for position, values in per_run.items():
            by_position[position].append(statistics.fmean(values))
    rows = []
    for position in ("first", "middle", "last"):
        values = by_position.get(position)
        if not values:
            continue
        mean, low, high = _t_interval(values)
        rows.append(
            {
                "position": position,
                "runs": len(values),
                "vs_run_pct": _pct(mean),
                "ci_pct": [_pct(low), _pct(high)],
            }
        )
    return rows


def stall_counts(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Calls over ``STALL_FACTOR`` x their block's median, and blocks with page faults, in
    each worker's first timed block against its other blocks."""
    counts = {"first": [0, 0, 0, 0], "other": [0, 0, 0, 0]}  # slow, calls, faulted, blocks
    worst = 0.0
    for run in runs:
        by_worker: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for record in run["records"]:
            by_worker[record.get("worker", 0)].append(record)
        for records in by_worker.values():
            first = min(records, key=lambda r: r["wall_start"])
            first_key = (first["case"], first["tokens"], first["block"])
            blocks: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
            for record in records:
                blocks[(record["case"], record["tokens"], record["block"])].append(record)
            for key, block in blocks.items():
                calls = [s[0] for r in block for s in r["samples_us"]]
                median = statistics.median(calls)
                slow = [c for c in calls if c > STALL_FACTOR * median]
                worst = max([worst, *(c / median for c in calls)])
                faulted = sum(1 for r in block if (r.get("minor_faults") or 0) > 0)
                tally = counts["first" if key == first_key else "other"]
                tally[0] += len(slow)
                tally[1] += len(calls)
                tally[2] += faulted
                tally[3] += len(block)
    return {"counts": counts, "worst_ratio": worst}


def parent_activity(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The parent's activity while workers measured, over every worker of ``runs``."""
    seen = [
        w["parent_while_measuring"]
        for run in runs
        for w in run["metadata"].get("workers") or []
        if w.get("parent_while_measuring")
    ]
    if not seen:
        return {"workers": 0}

    def most(field: str) -> float | None:
        values = [s[field] for s in seen if s.get(field) is not None]
        return max(values) if values else None

    return {
        "workers": len(seen),
        "max_cpu_s": most("cpu_s"),
        "max_cpu_share": max(s["cpu_s"] / s["measuring_s"] for s in seen if s["measuring_s"]),
        "max_written_bytes": most("written_bytes"),
        "max_other_read_bytes": most("other_read_bytes"),
    }


# --------------------------------------------------------------------------- tables


def _level_table(rows: Sequence[dict[str, Any]], pairs: int) -> C.Section:
    table = C.markdown_table(
        [
            "case",
            "variant",
            "workers (µs)",
            "one process (µs)",
            "workers ÷ one",
            "95 % interval",
            "between-run SD",
            "within noise",
        ],
        [
            [
                r["case"],
                r["variant"],
                r["workers_us"],
                r["single_us"],
                f"{r['ratio_pct']:+.1f} %",
                "[{:+.1f}, {:+.1f}] %".format(*r["ratio_ci_pct"]),
                f"{r['between_run_sd_pct']:.1f} %",
                "yes" if r["agree"] else "**no**",
            ]
            for r in rows
        ],
        align="llrrrrrl",
    )
    note = (
        f"{pairs} alternating pairs. Each run's level: the median of its per-block medians. "
        "Workers ÷ one: the mean of the pairs' log ratios, as a percentage, with its t "
        "interval over pairs; between-run SD: the SD of the log level over runs of one mode, "
        "pooled over the two modes. Within noise: the mean ratio is no larger than that SD."
    )
    return C.Section("Worker processes against one process", table, note)


def _position_table(rows: Sequence[dict[str, Any]]) -> C.Section:
    table = C.markdown_table(
        ["worker position", "runs", "per-block medians ÷ run level", "95 % interval"],
        [
            [
                r["position"],
                r["runs"],
                f"{r['vs_run_pct']:+.1f} %",
                "[{:+.1f}, {:+.1f}] %".format(*r["ci_pct"]),
            ]
            for r in rows
        ],
        align="lrrr",
    )
    return C.Section(
        "Worker position (the workers' runs)",
        table,
        "Each worker's per-block medians over its run's level for that case and variant, the "
        "log mean per run, then a t interval over runs. No position should sit apart.",
    )


def _stall_table(found: dict[str, dict[str, Any]]) -> C.Section:
    rows = []
    for mode, data in found.items():
        for where in ("first", "other"):
            slow, calls, faulted, blocks = data["counts"][where]
            rows.append(
                [
                    mode,
                    f"{where} block" if where == "first" else "other blocks",
                    f"{slow} / {calls}",
                    f"{faulted} / {blocks}",
                ]
            )
    worst = max(d["worst_ratio"] for d in found.values())
    return C.Section(
        "First-block stalls",
        C.markdown_table(
            [
                "runs",
                "blocks",
                f"calls over {STALL_FACTOR:g}x their block's median",
                "block halves with page faults",
            ],
            rows,
            align="llrr",
        ),
        f"First block: each worker's first timed block (by wall time). Worst call over its "
        f"block's median in any run: {worst:.1f}x.",
    )


def _parent_table(found: dict[str, Any]) -> C.Section:
    rows = [
        [
            found["workers"],
            found.get("max_cpu_s"),
            found.get("max_cpu_share"),
            found.get("max_written_bytes"),
            found.get("max_other_read_bytes"),
        ]
    ]
    return C.Section(
        "The parent while workers measured",
        C.markdown_table(
            [
                "workers",
                "max CPU s",
                "max CPU share",
                "max bytes written",
                "max bytes read besides the pipe",
            ],
            rows,
            align="rrrrr",
        ),
        "From each worker's parent_while_measuring in metadata.json (docs/format.md).",
    )


# --------------------------------------------------------------------------- main


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=None, help="alternating pairs (default 10)")
    p.add_argument("--keep", metavar="DIR", help="keep every run's output directory under DIR")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="analyse pairs kept under DIR")
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    if args.from_dir and (args.extra or args.pairs or args.keep or args.quick):
        p.error("--from analyses kept pairs: it takes no --pairs, --keep, --quick or run flags")
    # Kept pairs are read before the session: a --from without any need not wait for it.
    kept = _kept_pairs(Path(args.from_dir)) if args.from_dir else []
    session = C.Session("worker_position", args)
    flags = [*(C.QUICK_RUN_FLAGS if args.quick else []), *args.extra]
    if args.from_dir:
        pairs = kept
    else:
        count = args.pairs or (2 if args.quick else 10)
        with tempfile.TemporaryDirectory(prefix="embedbench-position-") as tmp:
            where = Path(args.keep) if args.keep else Path(tmp)
            for index in range(count):
                order = MODES if index % 2 == 0 else MODES[::-1]
                for mode in order:
                    print(f"pair {index + 1}/{count}: {mode} ...", file=sys.stderr, flush=True)
                    mode_flags = [*flags, *(SINGLE_FLAGS if mode == "single" else [])]
                    C.embedbench_run(
                        where / f"pair{index:02d}-{mode}",
                        mode_flags,
                        core=session.core,
                        label=f"pair {index + 1} {mode}",
                    )
            pairs = _kept_pairs(where)
    levels = level_rows(pairs)
    positions = position_rows(pairs)
    stalls = {mode: stall_counts([p[mode] for p in pairs]) for mode in MODES}
    parent = parent_activity([p["workers"] for p in pairs])
    sections = [
        _level_table(levels, len(pairs)),
        _position_table(positions),
        _stall_table(stalls),
        _parent_table(parent),
    ]
    data = {
        "flags": flags,
        "pairs": len(pairs),
        "levels": levels,
        "positions": positions,
        "stalls": stalls,
        "parent": parent,
    }
    C.publish(session, sections, data)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
