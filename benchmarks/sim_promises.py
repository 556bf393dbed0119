"""The kit's promises as operating characteristics, on the simulated host (embedbench.sim).

Each condition runs many seeded simulated runs of the kit's own pipeline and counts:

- **quiet**: hosts with worker and run regimes, nothing else running, the A/A check on:
  the share of runs labelled noisy (a false alarm), the share of unlabelled runs whose
  Text or A/A interval calls a direction (both forms do the same work), whether every
  estimate lies inside its own interval, and the cross-coverage of a rerun per case
  (groups of ``GROUP`` runs on one host: the share of ordered pairs with run j's
  estimate inside run i's interval);
- **always**: a memory neighbour on another core that moves the measured work by
  about 13 %, switched on after ``WARM`` quiet runs built the host's stored reference:
  the share labelled;
- **bursts**: off-CPU bursts on the measuring core taking about 15 % of its time: the
  share labelled;
- **toggled**: the neighbour on and off every second: the share labelled.

``--break RULE`` runs the same with one of the kit's rules deliberately broken, to show
which promise each rule keeps: ``floor`` (the interval without its block-noise floor),
``reference`` (no stored quiet reference), ``preempted`` (no preempted-share rule).

Targets (docs/method.md, "What the tests promise"): false alarms ≤ 10 %; Text and A/A
called in ≤ 5 % of unlabelled runs (a binomial test at 1 % that the rate exceeds 5 %);
every estimate inside its interval; cross-coverage ≥ 0.80 per case; the always-on
neighbour and the bursts labelled in every run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import _common as C

from embedbench.config import RunConfig
from embedbench.sim import Neighbour, SimulatedHost, Simulation

CASES = ("text", "audio")
TOKENS = 1172
GROUP = 10  # runs per simulated host for cross-coverage
WARM = 5  # quiet runs that build a host's reference before its neighbour starts
FALSE_ALARM_LIMIT = 0.10
CALL_RATE = 0.05
CALL_TEST_P = 0.01
COVERAGE_TARGET = 0.80
QUIET = SimulatedHost()
ALWAYS = SimulatedHost(neighbour=Neighbour("always"))
BURSTS = SimulatedHost(burst_rate_hz=50.0, burst_us=3000.0)
TOGGLED = SimulatedHost(neighbour=Neighbour("toggled", period_s=1.0))
BROKEN_RULES = ("floor", "reference", "preempted")


def config(aa: bool = False) -> RunConfig:
    """The design every condition runs: two cases at the default design."""
    return RunConfig(cases=list(CASES), aa_check=aa)


def labelled(result: Any) -> bool:
    """Whether the run's host-stability verdict is noisy."""
    return result.metadata["host_stability"]["verdict"] == "noisy"


def quiet_runs(hosts: int, seed: int = 0) -> list[tuple[int, Any]]:
    """``GROUP`` runs with the A/A check on each of ``hosts`` quiet simulated hosts."""
    runs = []
    for index in range(hosts):
        sim = Simulation(QUIET, seed + index)
        try:
            runs += [(index, sim.run(config(aa=True))) for _ in range(GROUP)]
        finally:
            sim.close()
    return runs


def neighbour_runs(host: SimulatedHost, hosts: int, per_host: int, warm: int, seed: int = 0):
    """On each of ``hosts`` simulated hosts: ``warm`` quiet runs, then ``per_host`` runs
    with ``host``'s knobs (its neighbour or bursts)."""
    runs = []
    for index in range(hosts):
        sim = Simulation(QUIET, seed + index)
        try:
            for _ in range(warm):
                sim.run(config())
            runs += [sim.run(config(), host) for _ in range(per_host)]
        finally:
            sim.close()
    return runs


@dataclass(frozen=True)
class Calls:
    """How often intervals that must cover 0 called a direction, among unlabelled runs."""

    called: int
    runs: int

    @property
    def rate(self) -> float:
        return self.called / self.runs if self.runs else 0.0

    @property
    def p_above(self) -> float:
        """One-sided binomial p-value that the true rate exceeds ``CALL_RATE``."""
        from scipy import stats as sps

        return float(sps.binom.sf(self.called - 1, self.runs, CALL_RATE)) if self.runs else 1.0

    @property
    def kept(self) -> bool:
        return self.p_above >= CALL_TEST_P


def text_calls(runs: Sequence[tuple[int, Any]]) -> Calls:
    """Text rows that call faster or slower, in runs not labelled noisy."""
    rows = [r.summary_row("text", TOKENS) for _, r in runs if not labelled(r)]
    return Calls(sum(row["verdict"] != "no detectable difference" for row in rows), len(rows))


def aa_calls(runs: Sequence[tuple[int, Any]]) -> Calls:
    """A/A intervals that miss 0, over every case of the runs not labelled noisy."""
    rows = [row["aa"] for _, r in runs if not labelled(r) for row in r.summary if row.get("aa")]
    return Calls(sum(not row["covers_zero"] for row in rows), len(rows))


def estimates_outside(runs: Sequence[tuple[int, Any]]) -> list[str]:
    """Rows (and A/A rows) whose point estimate lies outside their own interval."""
    bad = []
    for index, result in runs:
        for row in result.summary:
            for what, part in (("", row), (" A/A", row.get("aa"))):
                if part is None:
                    continue
                low, high = part["reduction_ci95_pct"]
                if not low <= part["reduction_pct"] <= high:
                    bad.append(f"host {index} {row['case']}{what}")
    return bad


def cross_coverage(runs: Sequence[tuple[int, Any]], case: str) -> float:
    """Share of ordered pairs of runs on one host with run j's estimate in run i's interval."""
    hits = total = 0
    for _, group in itertools.groupby(runs, key=lambda item: item[0]):
        rows = [r.summary_row(case, TOKENS) for _, r in group]
        for a, b in itertools.permutations(rows, 2):
            low, high = a["reduction_ci95_pct"]
            hits += low <= b["reduction_pct"] <= high
            total += 1
    return hits / total if total else float("nan")


def share_labelled(runs: Sequence[Any]) -> float:
    """The share of ``runs`` labelled noisy."""
    return sum(labelled(r) for r in runs) / len(runs)


@contextlib.contextmanager
def broken(rule: str | None) -> Iterator[None]:
    """The kit with ``rule`` switched off for the body (nothing with None)."""
    if rule is None:
        yield
        return
    from unittest import mock

    from embedbench.harness import stability, stats

    if rule == "floor":
        patch = mock.patch.object(stats, "within_worker_variance", lambda *_a, **_k: None)
    elif rule == "reference":
        patch = mock.patch.object(stability, "reference_from", lambda *_a, **_k: None)
    elif rule == "preempted":
        patch = mock.patch.object(stability, "preempted_shares", lambda *_a, **_k: {})
    else:
        raise SystemExit(f"sim_promises: --break takes {', '.join(BROKEN_RULES)}, got {rule!r}")
    with patch:
        yield


# --------------------------------------------------------------------------- main


def _fmt_calls(calls: Calls) -> str:
    return f"{calls.called}/{calls.runs} ({100 * calls.rate:.1f} %, p {calls.p_above:.3f})"


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=20, help="simulated hosts per condition")
    p.add_argument("--seed", type=int, default=0, help="first host's seed")
    p.add_argument("--break", dest="rule", choices=BROKEN_RULES, help="switch one rule off")
    args = p.parse_args()
    hosts = 3 if args.quick else args.hosts
    session = C.Session("sim_promises", args)
    started = time.perf_counter()
    with broken(args.rule):
        quiet = quiet_runs(hosts, args.seed)
        always = neighbour_runs(ALWAYS, hosts, GROUP, WARM, args.seed)
        bursts = neighbour_runs(BURSTS, hosts, GROUP, 0, args.seed)
        toggled = neighbour_runs(TOGGLED, hosts, GROUP, 0, args.seed)
    text, aa = text_calls(quiet), aa_calls(quiet)
    outside = estimates_outside(quiet)
    coverage = {case: cross_coverage(quiet, case) for case in CASES}
    rows = [
        [
            "quiet: labelled (false alarm)",
            f"{100 * share_labelled([r for _, r in quiet]):.1f} %",
            f"≤ {100 * FALSE_ALARM_LIMIT:.0f} %",
        ],
        ["quiet: Text called", _fmt_calls(text), f"≤ {100 * CALL_RATE:.0f} % (p ≥ {CALL_TEST_P})"],
        ["quiet: A/A called", _fmt_calls(aa), f"≤ {100 * CALL_RATE:.0f} % (p ≥ {CALL_TEST_P})"],
        ["quiet: estimates outside their interval", str(len(outside)), "0"],
        *[
            [f"quiet: cross-coverage, {case}", f"{value:.3f}", f"≥ {COVERAGE_TARGET}"]
            for case, value in coverage.items()
        ],
        ["always-on neighbour: labelled", f"{100 * share_labelled(always):.1f} %", "100 %"],
        ["bursts: labelled", f"{100 * share_labelled(bursts):.1f} %", "100 %"],
        ["toggled neighbour: labelled", f"{100 * share_labelled(toggled):.1f} %", "(no target)"],
    ]
    runs = len(quiet) + len(always) * (WARM + GROUP) // GROUP + len(bursts) + len(toggled)
    note = (
        f"{hosts} simulated hosts per condition, {GROUP} runs each (cases {', '.join(CASES)}, "
        f"default design), seeds from {args.seed}; {runs} runs in "
        f"{time.perf_counter() - started:.0f} s. Broken rule: {args.rule or 'none'}."
    )
    C.publish(
        session,
        [
            C.Section(
                "Promises on the simulated host",
                C.markdown_table(["promise", "measured", "target"], rows, align="lrr"),
                note,
            )
        ],
        {
            "rule": args.rule,
            "hosts": hosts,
            "text": vars(text),
            "aa": vars(aa),
            "outside": outside,
            "coverage": coverage,
            "always": share_labelled(always),
            "bursts": share_labelled(bursts),
            "toggled": share_labelled(toggled),
        },
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
