"""Between-run reproducibility: does one run's interval predict the next run?

Runs ``python -m embedbench run`` N times in a row (default 10, all defaults plus any
``-- EXTRA`` flags), each in a fresh process into its own output directory, and reads
every ``summary.json``. Per case:

- the mean reduction over runs and its between-run SD (percentage points);
- the mean 95 % half-width of ``reduction_ci95_pct`` (the interval the verdict uses);
- cross-coverage: the share of ordered pairs of runs (i, j ≠ i) where run j's reduction
  lies inside run i's interval. A calibrated 95 % interval gives about 0.83 (two
  independent estimates differ by √2 standard errors);
- calibration: the between-run SD over the root-mean-square of each run's own standard
  error (its worker headlines' SD / √workers), with the one-sided F-test p-value that
  runs vary more than their intervals assume. About 1 when the interval sees all the
  noise; a steadier statistic than cross-coverage, and pooling sets sharpens it;
- with ``--aa`` among the flags: in how many runs the A/A interval covers 0.

Targets (docs/PERFORMANCE.md, "Between-run reproducibility"): cross-coverage ≥ 0.80 for
every case; between-run SD ≤ 1.5 pp and mean half-width ≤ 3.5 pp for every multimodal
case; every A/A interval covers 0 in at least 9 of 10 runs.

``--quick``: 2 runs (the fewest with a between-run SD) of a reduced design (warm-up 1, 2
blocks × 3 calls in one process), a smoke run. One process has no worker headlines, so
its calibration column reads nan; ``--quick -- --processes 2 --blocks 4`` fills it.
``--from DIR [DIR ...]``: analyse runs kept earlier with ``--keep`` instead of running;
several DIRs pool their runs (e.g. three 10-run sets as one of 30).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as C

CASE_ORDER = ("text", "audio", "image", "video", "mixed", "interleaved")
TARGET_COVERAGE = 0.80
TARGET_SD_PP = 1.5
TARGET_HALF_WIDTH_PP = 3.5
TARGET_AA_COVERED = 0.9


def cross_coverage(estimates: Sequence[float], intervals: Sequence[Sequence[float]]) -> float:
    """Share of ordered pairs (i, j != i) with estimate j inside interval i."""
    n = len(estimates)
    if n < 2:
        return float("nan")
    hits = sum(
        intervals[i][0] <= estimates[j] <= intervals[i][1]
        for i in range(n)
        for j in range(n)
        if i != j
    )
    return hits / (n * (n - 1))


def expected_cross_coverage(
    workers: int, runs: int, *, reps: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """What a perfectly calibrated t interval over ``workers`` gives in a ``runs``-run
    sample: the mean cross-coverage and the chance that it falls below the 0.80 target
    (simulated, seeded; normal worker headlines, no run-level effect)."""
    import numpy as np
    from scipy import stats as sps

    rng = np.random.default_rng(seed)
    t = float(sps.t.ppf(0.975, workers - 1))
    theta = rng.standard_normal((reps, runs, workers))
    est = theta.mean(axis=2)
    half = t * theta.std(axis=2, ddof=1) / np.sqrt(workers)
    inside = np.abs(est[:, None, :] - est[:, :, None]) <= half[:, :, None]
    off_diagonal = ~np.eye(runs, dtype=bool)
    share = inside[:, off_diagonal].mean(axis=1)
    return float(share.mean()), float((share < TARGET_COVERAGE).mean())


def calibration_ratio(
    estimates: Sequence[float], worker_estimates: Sequence[Sequence[float]]
) -> tuple[float, float]:
    """(between-run SD of the estimates / RMS of each run's standard error, one-sided
    F-test p-value that the runs vary more than that error allows). Each run's standard
    error is its worker estimates' SD / sqrt(workers): what its t interval is built on."""
    import numpy as np
    from scipy import stats as sps

    workers = [np.asarray(w, dtype=float) for w in worker_estimates]
    if len(estimates) < 2 or any(len(w) < 2 for w in workers):
        return float("nan"), float("nan")
    within = float(np.mean([w.var(ddof=1) / len(w) for w in workers]))
    between = float(np.var(np.asarray(estimates, dtype=float), ddof=1))
    if within == 0.0:
        return float("nan"), float("nan")
    df_within = sum(len(w) - 1 for w in workers)
    p = float(sps.f.sf(between / within, len(estimates) - 1, df_within))
    return (between / within) ** 0.5, p


def _run_record(wall: float, meta: dict[str, Any], summary: list[Any]) -> dict[str, Any]:
    """What the analysis reads of one run, live or kept."""
    return {"wall_s": wall, "summary": summary, "processes": meta.get("processes")}


def _one_run(index: int, work: Path, flags: list[str], core: int) -> dict[str, Any]:
    wall, meta, summary = C.embedbench_run(
        work / f"run{index:02d}", flags, core=core, label=f"run {index}"
    )
    return _run_record(wall, meta, summary)


def _kept_runs(dirs: Sequence[str]) -> list[dict[str, Any]]:
    """The runs kept under each DIR (``--keep``): every ``run*`` with a summary.json."""
    runs = []
    for top in dirs:
        found = sorted(d for d in Path(top).glob("run*") if (d / "summary.json").is_file())
        if not found:
            print(f"between_runs: no kept runs (run*/summary.json) under {top}", file=sys.stderr)
            raise SystemExit(2)
        for d in found:
            meta = json.loads((d / "metadata.json").read_text())
            summary = json.loads((d / "summary.json").read_text())
            # The run's own start to end (the live path also counts the process start).
            wall = (meta.get("end_time") or 0.0) - (meta.get("start_time") or 0.0)
            runs.append(_run_record(wall, meta, summary))
    return runs


def _per_case(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}
    for run in runs:
        for row in run["summary"]:
            if row.get("reduction_pct") is None:
                continue
            entry = cases.setdefault(
                row["case"],
                {
                    "label": row["label"],
                    "red": [],
                    "ci": [],
                    "aa_covers": [],
                    "pooled": [],
                    "workers": [],
                },
            )
            entry["red"].append(row["reduction_pct"])
            entry["workers"].append(row.get("worker_reduction_pct") or [])
            entry["pooled"].append(row.get("pooled_reduction_pct"))
            entry["ci"].append(row["reduction_ci95_pct"])
            aa = row.get("aa")
            if aa is not None:
                low, high = aa["reduction_ci95_pct"]
                entry["aa_covers"].append(low <= 0.0 <= high)
    for entry in cases.values():
        entry["mean"] = sum(entry["red"]) / len(entry["red"])
        entry["sd"] = C.sd(entry["red"])
        entry["half_width"] = sum((h - lo) / 2 for lo, h in entry["ci"]) / len(entry["ci"])
        entry["coverage"] = cross_coverage(entry["red"], entry["ci"])
        entry["calibration"], entry["calibration_p"] = calibration_ratio(
            entry["red"], entry["workers"]
        )
        if None not in entry["pooled"]:  # the PR's statistic pooled over workers (JSON only)
            entry["pooled_sd"] = C.sd(entry["pooled"])
            entry["pooled_coverage"] = cross_coverage(entry["pooled"], entry["ci"])
    return cases


def _table(cases: dict[str, dict[str, Any]], runs: int) -> tuple[str, list[str]]:
    rows, missed = [], []
    for case in sorted(cases, key=lambda c: CASE_ORDER.index(c) if c in CASE_ORDER else 99):
        e = cases[case]
        multimodal = case != "text"
        checks = [e["coverage"] >= TARGET_COVERAGE]
        if multimodal:
            checks += [e["sd"] <= TARGET_SD_PP, e["half_width"] <= TARGET_HALF_WIDTH_PP]
        aa = "–"
        if e["aa_covers"]:
            covered = sum(e["aa_covers"])
            aa = f"{covered}/{len(e['aa_covers'])}"
            checks.append(covered >= TARGET_AA_COVERED * len(e["aa_covers"]))
        met = all(checks)
        if not met:
            missed.append(e["label"])
        rows.append(
            [
                e["label"],
                " ".join(f"{r:.1f}" for r in e["red"]),
                e["mean"],
                e["sd"],
                e["half_width"],
                e["coverage"],
                f"{e['calibration']:.2f} (p {e['calibration_p']:.2f})",
                aa,
                "yes" if met else "**no**",
            ]
        )
    headers = [
        "case",
        f"reduction % of each of {runs} runs",
        "mean %",
        "between-run SD (pp)",
        "mean 95 % half-width (pp)",
        "cross-coverage",
        "SD ÷ within-run SE",
        "A/A covers 0",
        "targets met",
    ]
    return C.markdown_table(headers, rows, align="llrrrrrrl"), missed


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--runs", type=int, default=None, help="consecutive runs (default 10; --quick: 2)"
    )
    p.add_argument("--keep", metavar="DIR", help="keep every run's output directory under DIR")
    p.add_argument(
        "--from",
        dest="from_dirs",
        nargs="+",
        metavar="DIR",
        help="analyse runs kept with --keep under DIR instead of running (several pool)",
    )
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    if args.from_dirs and (args.extra or args.runs or args.keep or args.quick):
        p.error("--from analyses kept runs: it takes no --runs, --keep, --quick or run flags")
    # Kept runs are read before the session: a --from without any need not wait for it.
    kept = _kept_runs(args.from_dirs) if args.from_dirs else []
    session = C.Session("between_runs", args)
    flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
    if args.from_dirs:
        runs = kept
        runs_n = len(runs)
        what = (
            f"{runs_n} runs kept under {', '.join(args.from_dirs)}, analysed together "
            "(wall: each run's start to end in its metadata)"
        )
    else:
        runs_n = args.runs or (2 if args.quick else 10)
        with tempfile.TemporaryDirectory(prefix="embedbench-between-") as tmp:
            where = Path(args.keep) if args.keep else Path(tmp)
            runs = []
            for i in range(runs_n):
                print(f"run {i + 1}/{runs_n} ...", file=sys.stderr, flush=True)
                runs.append(_one_run(i, where, flags, session.core))
        what = f"`embedbench run {' '.join(flags) or '(all defaults)'}`, {runs_n} runs back to back"
    cases = _per_case(runs)
    table, missed = _table(cases, runs_n)
    walls = [r["wall_s"] for r in runs]
    workers = runs[0]["processes"] or 1
    calibrated = ""
    if workers > 1:
        mean_cc, below = expected_cross_coverage(workers, runs_n)
        calibrated = (
            f"For scale: a perfectly calibrated interval over {workers} workers gives a mean "
            f"cross-coverage of {mean_cc:.2f} in {runs_n}-run samples, and one below "
            f"{TARGET_COVERAGE:.2f} in {100 * below:.0f} % of such samples per case. "
        )
    note = (
        f"{what}; wall per run median {C.median(walls):.1f} s (min {min(walls):.1f}, max "
        f"{max(walls):.1f}); processes per run: {workers}. Cross-coverage: "
        "share of ordered pairs (i, j ≠ i) with run j's reduction inside run i's 95 % "
        "interval (≈ 0.83 when calibrated). "
        + calibrated
        + "SD ÷ within-run SE: the between-run SD over the root-mean-square of each run's "
        "own standard error, about 1 when the interval sees all the noise (p: one-sided F "
        "test that runs vary more). "
        + (f"Targets missed: {', '.join(missed)}." if missed else "Every target met.")
    )
    session.add("Between-run reproducibility", table, note)
    session.data.update(
        {
            "flags": flags,
            "from": args.from_dirs,
            "runs": runs_n,
            "wall_s": walls,
            "cases": {k: {n: v for n, v in e.items() if n != "label"} for k, e in cases.items()},
            "missed": missed,
        }
    )
    session.finish()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
