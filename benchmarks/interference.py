"""Interference: does the canary see a noisy neighbour, and are the runs it calls stable right?

Alternates default runs (``python -m embedbench run``, all defaults plus any ``-- EXTRA``
flags) on a quiet machine with runs under an injected neighbour (``benchmarks/neighbour.py``):
a copy loop over twice the L3 (at least 64 MiB) pinned to another allowed core, toggled
(on 3 s, off 3 s) or always on, CPU bursts on the measuring core (50 ms in every
150 ms: below the contention guard's bar), and, as a control that must not be labelled,
another core spinning on and off (busy, but touching no memory). The order is quiet,
toggled, quiet, always-on, quiet, bursts, quiet, spinning, … so that each neighbour run has
a quiet run next to it. Per condition:

- how many runs the kit labelled noisy (``host_stability.verdict``) or refused (exit 2,
  the quiet-host wait ran out): the detection rate on hog runs (target 100 %) and the
  false-alarm rate on quiet and spinning runs (target ≤ 10 %);
- among the runs it did not label (stable runs of any condition): per case, the mean
  reduction, between-run SD, mean half-width and cross-coverage (target ≥ 0.80 every
  case), and Text verdicts other than "no detectable difference" (target 0: Text does one
  lookup in both forms);
- the canary's cost: its reads (at every block edge, in the probes with their pace
  reads, and each worker's warm pass) as a share of each run's wall time (target ≤ 2 %),
  and beside it the time its probes spent waiting for a quiet host.

Then, on the same machine in the same period, embedbench and pyperf side by side on pairs
whose answer is known (``benchmarks/side_by_side.py``: BLAKE2b 21 against 20 hashes, an
A/A pair, the replica's Audio case), ``--side-by-side`` tries each (default 4; 0 skips):
the share of right verdicts and the wall time, per tool.

``--neighbours toggled,always`` alternates only those kinds (of toggled, always, bursts
and spin) with the quiet runs. ``--quick``: 1 quiet and 1 neighbour run (the toggled hog)
of a reduced design (warm-up 1, 2 blocks × 3 calls in one process; a smoke run, not
evidence; the neighbour given 0.2 s to start instead of 1 s; no side-by-side unless
asked, and then only the A/A pair). ``--from DIR``: analyse runs kept with ``--keep DIR``
(and their side-by-side tries, if kept) instead of running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as C
import side_by_side
from between_runs import CASE_ORDER, cross_coverage

from embedbench.harness.stability import busy_throughout

QUIET, TOGGLED, ALWAYS = "quiet", "hog on/off 3 s", "hog always on"
BURSTS = "CPU bursts on the core"
SPIN = "other core spinning on/off 3 s"
HOG_ARGS = {
    TOGGLED: ["--on", "3", "--off", "3"],
    ALWAYS: ["--on", "1", "--off", "0"],
    BURSTS: ["--spin", "--on", "0.05", "--off", "0.1"],
    SPIN: ["--spin", "--on", "3", "--off", "3"],
}
NEIGHBOURS = (TOGGLED, ALWAYS, BURSTS, SPIN)
# Conditions that must not be labelled: nothing else running, or a busy other core that
# touches no memory (the cause without the effect, as unrelated busy cores on a GPU box).
HARMLESS = (QUIET, SPIN)
TARGET_DETECTION = 1.0
TARGET_FALSE_ALARM = 0.10
TARGET_COVERAGE = 0.80
TARGET_COST = 0.02
REFUSED = "refused"
SIDE_BY_SIDE_TRIES = 4
SIDE_BY_SIDE_FILE = "side_by_side.json"


# Short names for --neighbours.
NEIGHBOUR_KEYS = {"toggled": TOGGLED, "always": ALWAYS, "bursts": BURSTS, "spin": SPIN}


def schedule(pairs: int, neighbours: Sequence[str] = NEIGHBOURS, warm: int = 0) -> list[str]:
    """Conditions in run order: ``warm`` quiet runs (they build the host's quiet reference,
    as a user's earlier runs would), then each neighbour run after a quiet run, the kinds
    in turn."""
    order: list[str] = [QUIET] * warm
    for i in range(pairs):
        order += [QUIET, neighbours[i % len(neighbours)]]
    return order


def neighbour_kinds(keys: str | None) -> tuple[str, ...]:
    """The conditions named by ``--neighbours`` (comma-separated short names), or all."""
    if not keys:
        return NEIGHBOURS
    names = [k.strip() for k in keys.split(",") if k.strip()]
    unknown = [k for k in names if k not in NEIGHBOUR_KEYS]
    if unknown or not names:
        named = ",".join(unknown) if unknown else repr(keys)
        raise ValueError(
            f"unknown --neighbours {named}; "
            f"use a comma-separated list of {', '.join(NEIGHBOUR_KEYS)}"
        )
    return tuple(NEIGHBOUR_KEYS[k] for k in names)


def other_core(core: int) -> int | None:
    """An allowed core other than ``core`` for the neighbour (None when there is none)."""
    others = [c for c in sorted(os.sched_getaffinity(0)) if c != core]
    return others[-1] if others else None


def _start_hog(condition: str, core: int | None, start_s: float = 1.0) -> subprocess.Popen | None:
    """The neighbour of ``condition`` on ``core`` (bursts: on the measuring core), given
    ``start_s`` to start."""
    if condition == QUIET:
        return None
    cmd = [sys.executable, str(Path(__file__).with_name("neighbour.py")), *HOG_ARGS[condition]]
    cmd += ["--seconds", "900", *(["--core", str(core)] if core is not None else [])]
    hog = subprocess.Popen(cmd)
    time.sleep(start_s)  # let it allocate and start copying before the run's guards look
    return hog


def _stop(hog: subprocess.Popen | None) -> None:
    if hog is not None:
        hog.terminate()
        hog.wait(timeout=30)


def canary_seconds(meta: dict[str, Any], records: Sequence[dict[str, Any]]) -> float:
    """Seconds spent on the canary: every block edge's read, every probe's reads (its last
    attempt's as recorded in ``host_probes``, earlier attempts at its median) and pace
    reads (at the probe's median pace), and each worker's warm pass (``ROW_SETS`` reads
    when its canary is built, at its first probe's median)."""
    from embedbench.harness.canary import PROBE_COPIES, ROW_SETS

    edges = sum(
        r.get(key) or 0.0
        for r in records
        for key in ("canary_us_start", "canary_us_end", "canary_device_us_start")
    )
    probes = meta["host_probes"]
    reads = sum(
        sum(p.get("samples_us") or []) + p["median_us"] * PROBE_COPIES * (p.get("attempts", 1) - 1)
        for p in probes
    )
    pace = sum((p.get("pace_us") or 0.0) * PROBE_COPIES * p.get("attempts", 1) for p in probes)
    first: dict[Any, float] = {}
    for p in probes:
        first.setdefault(p.get("worker"), p["median_us"])
    warm = ROW_SETS * sum(first.values())
    return (edges + reads + pace + warm) / 1e6


def one_run(
    out: Path, condition: str, flags: list[str], core: int, hog_start_s: float = 1.0
) -> dict[str, Any]:
    """One run under ``condition``: its outcome (verdict or refused), summary and cost."""
    hog = _start_hog(condition, core if condition == BURSTS else other_core(core), hog_start_s)
    try:
        wall, proc = C.launch_embedbench(out, flags, core=core)
    finally:
        _stop(hog)
    (out.parent / f"{out.name}.condition").write_text(condition)
    if proc.returncode == 2:
        line = (proc.stderr.strip().splitlines() or [""])[-1]
        return {"condition": condition, "outcome": REFUSED, "wall_s": wall, "error": line}
    if proc.returncode != 0:
        raise SystemExit(f"{condition} run exited {proc.returncode}: {proc.stderr[-400:]}")
    return kept_run(out, condition, wall)


def kept_run(out: Path, condition: str, wall: float | None = None) -> dict[str, Any]:
    """What the analysis reads of one finished run directory."""
    meta = json.loads((out / "metadata.json").read_text())
    records = json.loads((out / "micro-raw.json").read_text())
    seconds = wall if wall is not None else meta["end_time"] - meta["start_time"]
    host = meta.get("host_stability") or {}
    return {
        "condition": condition,
        "outcome": host.get("verdict", "not observed"),
        "reasons": host.get("reasons", []),
        "wall_s": seconds,
        "canary_s": canary_seconds(meta, records),
        "waited_s": sum(p.get("waited_s") or 0.0 for p in meta["host_probes"]),
        "summary": json.loads((out / "summary.json").read_text()),
        "workers": host.get("workers", []),
        "between_workers": host.get("between_workers"),
        "other_cores_busy": host.get("other_cores_busy"),
        "neighbour": host.get("neighbour"),
        "cannot_tell": host.get("verdict") == "stable" and busy_throughout(host),
        "reference": host.get("host_reference"),
    }


def _kept(top: Path) -> list[dict[str, Any]]:
    runs = []
    for marker in sorted(top.glob("run*.condition")):
        condition = marker.read_text()
        out = marker.with_suffix("")
        if (out / "summary.json").is_file():
            runs.append(kept_run(out, condition))
        else:
            runs.append({"condition": condition, "outcome": REFUSED, "wall_s": None})
    return runs


def detection_table(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Per condition: runs, labelled noisy, refused, and the rate against its target."""
    rows, rates = [], {}
    for condition in (QUIET, *NEIGHBOURS):
        mine = [r for r in runs if r["condition"] == condition]
        if not mine:
            continue
        noisy = sum(r["outcome"] == "noisy" for r in mine)
        refused = sum(r["outcome"] == REFUSED for r in mine)
        cannot_tell = sum(bool(r.get("cannot_tell")) for r in mine)
        judged = sum((r.get("reference") or {}).get("over") is not None for r in mine)
        rate = (noisy + refused) / len(mine)
        harmless = condition in HARMLESS
        target = TARGET_FALSE_ALARM if harmless else TARGET_DETECTION
        met = rate <= target if harmless else rate >= target
        rates[condition] = rate
        rows.append(
            [
                condition,
                len(mine),
                judged,
                noisy,
                refused,
                cannot_tell,
                f"{100 * rate:.0f} %",
                ("≤ " if harmless else "") + f"{100 * target:.0f} %",
                "yes" if met else "**no**",
            ]
        )
    headers = [
        "condition",
        "runs",
        "with a reference",
        "labelled noisy",
        "refused",
        "stable, said it cannot tell",
        "rate",
        "target",
        "met",
    ]
    return C.markdown_table(headers, rows, align="lrrrrrrrl"), rates


def by_case(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per case over ``runs``' summaries: its label, and each run's reduction, 95 %
    interval and verdict (rows without a reduction left out)."""
    cases: dict[str, dict[str, Any]] = {}
    for run in runs:
        for row in run["summary"]:
            if row.get("reduction_pct") is None:
                continue
            entry = cases.setdefault(
                row["case"], {"label": row["label"], "red": [], "ci": [], "verdicts": []}
            )
            entry["red"].append(row["reduction_pct"])
            entry["ci"].append(row["reduction_ci95_pct"])
            entry["verdicts"].append(row["verdict"])
    return cases


def stable_table(runs: list[dict[str, Any]]) -> tuple[str, list[str], int]:
    """Per case over the unlabelled (stable) runs: reductions, SD, half-width, coverage."""
    stable = [r for r in runs if r["outcome"] == "stable"]
    cases = by_case(stable)
    rows, missed = [], []
    for case in sorted(cases, key=lambda c: CASE_ORDER.index(c) if c in CASE_ORDER else 99):
        e = cases[case]
        coverage = cross_coverage(e["red"], e["ci"])
        half = sum((h - lo) / 2 for lo, h in e["ci"]) / len(e["ci"])
        wrong = sum(v != "no detectable difference" for v in e["verdicts"]) if case == "text" else 0
        met = coverage >= TARGET_COVERAGE and wrong == 0
        if not met:
            missed.append(e["label"])
        rows.append(
            [
                e["label"],
                len(e["red"]),
                sum(e["red"]) / len(e["red"]),
                C.sd(e["red"]),
                half,
                coverage,
                str(wrong) if case == "text" else "–",
                "yes" if met else "**no**",
            ]
        )
    headers = [
        "case",
        "stable runs",
        "mean %",
        "between-run SD (pp)",
        "mean 95 % half-width (pp)",
        "cross-coverage",
        "Text verdicts not 'no detectable difference'",
        "targets met",
    ]
    return C.markdown_table(headers, rows, align="lrrrrrrl"), missed, len(stable)


def runs_table(runs: list[dict[str, Any]]) -> str:
    """Every run: condition, outcome, wall, canary cost, worker spreads, first reason."""
    rows = []
    for i, r in enumerate(runs):
        spreads = " ".join(f"{100 * w['spread']:.0f}" for w in r.get("workers") or [])
        between = r.get("between_workers")
        rows.append(
            [
                i + 1,
                r["condition"],
                r["outcome"],
                r["wall_s"],
                "–" if not r.get("canary_s") else f"{100 * r['canary_s'] / r['wall_s']:.2f} %",
                "–" if r.get("waited_s") is None else f"{r['waited_s']:.1f}",
                spreads or "–",
                "–" if between is None else f"{100 * between:.1f}",
                _contrast(r.get("neighbour")),
                _over_reference(r.get("reference")),
                (r.get("reasons") or [r.get("error") or ""])[0][:90],
            ]
        )
    headers = [
        "run",
        "condition",
        "host",
        "wall (s)",
        "canary cost",
        "probes waited (s)",
        "worker canary spread (%)",
        "between workers (%)",
        "canary busy ÷ idle − 1 (halves)",
        "memory level over reference (runs)",
        "first reason",
    ]
    return C.markdown_table(headers, rows, align="rllrrrlrlll")


def _over_reference(reference: dict[str, Any] | None) -> str:
    """The run's memory level over the host's quiet reference, and how many runs that was."""
    if not reference:
        return "–"
    if reference.get("over") is None:
        return f"– ({reference.get('runs')})"
    return f"{100 * reference['over']:+.1f} % ({reference['runs']})"


def _contrast(neighbour: dict[str, Any] | None) -> str:
    """The canary's contrast between block halves with the other cores busy and idle."""
    if not neighbour:
        return "–"
    counts = f"({neighbour['busy_reads']} / {neighbour['idle_reads']})"
    if neighbour.get("effect") is None:
        return f"– {counts}"
    return f"{100 * neighbour['effect']:+.1f} % p {neighbour['p_value']:.1g} {counts}"


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--pairs", type=int, default=None, help="quiet + neighbour pairs (default 16; --quick: 1)"
    )
    p.add_argument("--keep", metavar="DIR", help="keep every run's output directory under DIR")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="analyse runs kept with --keep")
    p.add_argument(
        "--side-by-side",
        type=int,
        default=None,
        metavar="TRIES",
        help=f"tries per known pair and tool, embedbench and pyperf (default "
        f"{SIDE_BY_SIDE_TRIES}; 0 skips; --quick: 0)",
    )
    p.add_argument(
        "--neighbours",
        metavar="KINDS",
        help=f"neighbour kinds to alternate with quiet runs, comma-separated, of "
        f"{', '.join(NEIGHBOUR_KEYS)} (default: all, in that order)",
    )
    p.add_argument(
        "--reference-runs",
        type=int,
        default=None,
        metavar="N",
        help="quiet runs first, building the host's quiet reference (default 3; --quick: 0)",
    )
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    try:
        kinds = neighbour_kinds(args.neighbours)
    except ValueError as exc:
        print(f"interference.py: {exc}", file=sys.stderr)
        sys.exit(2)
    session = C.Session("interference", args)
    flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
    tries: list[dict[str, Any]] = []
    if args.from_dir:
        runs = _kept(Path(args.from_dir))
        kept_tries = Path(args.from_dir) / SIDE_BY_SIDE_FILE
        if kept_tries.is_file():
            tries = json.loads(kept_tries.read_text())
    else:
        warm = args.reference_runs if args.reference_runs is not None else (0 if args.quick else 3)
        order = schedule(args.pairs or (1 if args.quick else 16), kinds, warm)
        with tempfile.TemporaryDirectory(prefix="embedbench-interference-") as tmp:
            where = Path(args.keep) if args.keep else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            runs = []
            start_s = 0.2 if args.quick else 1.0  # the neighbour's time to start
            for i, condition in enumerate(order):
                print(f"run {i + 1}/{len(order)} ({condition}) ...", file=sys.stderr, flush=True)
                runs.append(one_run(where / f"run{i:02d}", condition, flags, session.core, start_s))
            n_tries = args.side_by_side
            if n_tries is None:
                n_tries = 0 if args.quick else SIDE_BY_SIDE_TRIES
            if n_tries > 0:
                pairs = ["same"] if args.quick else list(side_by_side.known_pairs.PAIRS)
                tries = side_by_side.run_tries(
                    pairs,
                    n_tries,
                    session.core,
                    quick=args.quick,
                    allow_busy="--allow-busy" in flags,
                )
                (where / SIDE_BY_SIDE_FILE).write_text(json.dumps(tries, indent=1))
    detection, rates = detection_table(runs)
    stable, missed, n_stable = stable_table(runs)
    costs = [r["canary_s"] / r["wall_s"] for r in runs if r.get("canary_s")]
    cost = max(costs) if costs else float("nan")
    waits = [r["waited_s"] for r in runs if r.get("waited_s") is not None]
    what = f"`embedbench run {' '.join(flags) or '(all defaults)'}`, neighbour on core " + str(
        other_core(session.core)
    )
    session.add(
        "Detection",
        detection,
        f"{what}; labelled = host_stability verdict noisy; rate = labelled or refused. "
        "'Said it cannot tell': stable, but the other cores never idled, so the report "
        "says a neighbour that never paused cannot be told from the host's own speed.",
    )
    session.add(
        "Unlabelled runs",
        stable,
        f"{n_stable} stable runs of {len(runs)}. "
        + (f"Targets missed: {', '.join(missed)}." if missed else "Every target met."),
    )
    session.add(
        "Every run",
        runs_table(runs),
        f"Canary cost: at most {100 * cost:.2f} % of a run's wall time "
        f"(target ≤ {100 * TARGET_COST:.0f} %). Probes waited for a quiet host "
        f"{sum(waits):.1f} s over {len(waits)} runs, at most {max(waits, default=0.0):.1f} s "
        "in one.",
    )
    if tries:
        session.add(
            "embedbench and pyperf on known pairs",
            side_by_side.table(tries),
            "Same machine, same period, after the runs above; pyperf through "
            "`pyperf.Runner` with its default worker processes, pinned with --affinity.",
        )
    session.data.update(
        {
            "side_by_side": tries,
            "flags": flags,
            "runs": [{k: v for k, v in r.items() if k != "summary"} for r in runs],
            "summaries": [r.get("summary") for r in runs],
            "rates": rates,
            "missed": missed,
            "canary_cost_max": cost,
        }
    )
    session.finish()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
