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
- **toggled**: the neighbour on and off every 0.3 s, faster than one worker measures a
  case: the share labelled; and by period (``TOGGLE_PERIODS``), to show where an
  in-run contrast stops seeing it: a neighbour that turns over no faster than a worker
  process lives leaves every worker all busy or all idle, which looks like the
  workers' own speed regimes (docs/PERFORMANCE.md, "What noisy means").

``--break RULE`` runs the same with one of the kit's rules deliberately broken, to show
which promise each rule keeps: ``floor`` (the interval without its block-noise floor),
``reference`` (no stored quiet reference), ``preempted`` (no preempted-share rule),
``neighbour`` (no busy-against-idle contrast).

``--quick`` (a smoke run): one host per condition, ``QUICK_GROUP`` runs on it after
``QUICK_WARM`` quiet ones, and one run per toggle period.

Targets (docs/method.md, "What the tests promise"): false alarms ≤ 10 %; Text and A/A
called in ≤ 5 % of unlabelled runs (a binomial test at 1 % that the rate exceeds 5 %);
every estimate inside its interval; cross-coverage ≥ 0.80 per case; the always-on
neighbour, the bursts and the fast-toggled neighbour labelled in every run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import _common as C

from embedbench.config import RunConfig
from embedbench.sim import Neighbour, SimulatedHost, Simulation

CASES = ("text", "audio")
TOKENS = 1172
GROUP = 10  # runs per simulated host for cross-coverage
WARM = 5  # quiet runs that build a host's reference before its neighbour starts
# --quick, per host: the fewest runs that still give a cross-coverage (two), after the
# fewest quiet runs a stored reference needs (stability.REFERENCE_MIN_RUNS).
QUICK_GROUP = 2
QUICK_WARM = 3
FALSE_ALARM_LIMIT = 0.10
CALL_RATE = 0.05
CALL_TEST_P = 0.01
COVERAGE_TARGET = 0.80
QUIET = SimulatedHost()
ALWAYS = SimulatedHost(neighbour=Neighbour("always"))
BURSTS = SimulatedHost(burst_rate_hz=50.0, burst_us=3000.0)
TOGGLED = SimulatedHost(neighbour=Neighbour("toggled", period_s=0.3))
TOGGLE_PERIODS = (0.1, 0.3, 1.0, 3.0, 6.0)
BROKEN_RULES = ("floor", "reference", "preempted", "neighbour")
# Each condition's host knobs (None: quiet, with the A/A check) and its quiet runs first.
CONDITIONS: dict[str, tuple[SimulatedHost | None, int]] = {
    "quiet": (None, 0),
    "always": (ALWAYS, WARM),
    "bursts": (BURSTS, 0),
    "toggled": (TOGGLED, 0),
}


def config(aa: bool = False) -> RunConfig:
    """The design every condition runs: two cases at the default design."""
    return RunConfig(cases=list(CASES), aa_check=aa)


def labelled(result: Any) -> bool:
    """Whether the run's host-stability verdict is noisy."""
    return result.metadata["host_stability"]["verdict"] == "noisy"


def quiet_runs(hosts: int, seed: int = 0, group: int = GROUP) -> list[tuple[int, Any]]:
    """``group`` runs with the A/A check on each of ``hosts`` quiet simulated hosts."""
    runs = []
    for index in range(hosts):
        sim = Simulation(QUIET, seed + index)
        try:
            runs += [(index, sim.run(config(aa=True))) for _ in range(group)]
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
    hits, total = coverage_counts(runs, case)
    return hits / total if total else float("nan")


def toggled_every(period_s: float) -> SimulatedHost:
    """A host whose memory neighbour is on for the first half of every ``period_s``."""
    return SimulatedHost(neighbour=Neighbour("toggled", period_s=period_s))


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
    elif rule == "neighbour":
        patch = mock.patch.object(stability, "neighbour_contrast", lambda *_a, **_k: None)
    else:
        raise SystemExit(f"sim_promises: --break takes {', '.join(BROKEN_RULES)}, got {rule!r}")
    with patch:
        yield


@dataclass
class Outcome:
    """What the promises read of one condition's runs, in counts that add up over hosts
    (so a condition can be run in parts, in separate processes, and pooled)."""

    runs: int = 0
    labelled: int = 0
    text: Calls = Calls(0, 0)
    aa: Calls = Calls(0, 0)
    outside: list[str] = field(default_factory=list)
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)  # case: (hits, pairs)

    @property
    def share_labelled(self) -> float:
        return self.labelled / self.runs if self.runs else 0.0

    def coverage_of(self, case: str) -> float:
        hits, pairs = self.coverage.get(case, (0, 0))
        return hits / pairs if pairs else float("nan")

    def __add__(self, other: Outcome) -> Outcome:
        cases = self.coverage.keys() | other.coverage.keys()
        return Outcome(
            self.runs + other.runs,
            self.labelled + other.labelled,
            Calls(self.text.called + other.text.called, self.text.runs + other.text.runs),
            Calls(self.aa.called + other.aa.called, self.aa.runs + other.aa.runs),
            self.outside + other.outside,
            {case: _added(self.coverage, other.coverage, case) for case in sorted(cases)},
        )


def _added(
    first: dict[str, tuple[int, int]], other: dict[str, tuple[int, int]], case: str
) -> tuple[int, int]:
    (hits, pairs), (more_hits, more_pairs) = first.get(case, (0, 0)), other.get(case, (0, 0))
    return hits + more_hits, pairs + more_pairs


def coverage_counts(runs: Sequence[tuple[int, Any]], case: str) -> tuple[int, int]:
    """(hits, ordered pairs) of ``cross_coverage``."""
    hits = total = 0
    for _, group in itertools.groupby(runs, key=lambda item: item[0]):
        rows = [r.summary_row(case, TOKENS) for _, r in group]
        for a, b in itertools.permutations(rows, 2):
            low, high = a["reduction_ci95_pct"]
            hits += low <= b["reduction_pct"] <= high
            total += 1
    return hits, total


def sizes(quick: bool) -> tuple[int, int]:
    """Runs per simulated host and the quiet runs before a neighbour, at the full design or
    ``quick``'s."""
    return (QUICK_GROUP, QUICK_WARM) if quick else (GROUP, WARM)


def condition_runs(
    condition: str, hosts: range, seed: int = 0, quick: bool = False
) -> list[tuple[int, Any]]:
    """(host index, run) of ``condition`` (``CONDITIONS``) on the hosts ``hosts`` (their
    seeds are ``seed`` + index, so a range of them runs the same as the whole);
    ``quick``: ``QUICK_GROUP`` runs a host after at most ``QUICK_WARM`` quiet ones."""
    host, warm = CONDITIONS[condition]
    group, most_warm = sizes(quick)
    warm = min(warm, most_warm)
    runs = []
    for index in hosts:
        sim = Simulation(QUIET, seed + index)
        try:
            if host is None:
                runs += [(index, sim.run(config(aa=True))) for _ in range(group)]
                continue
            for _ in range(warm):
                sim.run(config())
            runs += [(index, sim.run(config(), host)) for _ in range(group)]
        finally:
            sim.close()
    return runs


def outcome(
    condition: str, hosts: range, seed: int = 0, rule: str | None = None, quick: bool = False
) -> Outcome:
    """The promises' counts of ``condition_runs`` (with ``rule`` broken, if given)."""
    with broken(rule):
        runs = condition_runs(condition, hosts, seed, quick)
    results = [r for _, r in runs]
    return Outcome(
        len(results),
        sum(labelled(r) for r in results),
        text_calls(runs),
        aa_calls(runs),
        estimates_outside(runs),
        {case: coverage_counts(runs, case) for case in CASES} if condition == "quiet" else {},
    )


def _outcome_part(job: tuple[str, range, int, str | None, bool]) -> tuple[str, Outcome]:
    condition, hosts, seed, rule, quick = job
    return condition, outcome(condition, hosts, seed, rule, quick)


def outcomes(
    conditions: Sequence[str],
    hosts: int,
    seed: int = 0,
    *,
    processes: int = 1,
    rule: str | None = None,
    quick: bool = False,
) -> dict[str, Outcome]:
    """Each condition's ``Outcome`` over ``hosts`` hosts, split in halves of hosts over
    ``processes`` processes (the same counts as one process: every host has its seed)."""
    half = (hosts + 1) // 2
    jobs = [
        (condition, part, seed, rule, quick)
        for condition in conditions
        for part in (range(0, half), range(half, hosts))
        if len(part)
    ]
    pooled: dict[str, Outcome] = {condition: Outcome() for condition in conditions}
    if processes <= 1:
        parts = map(_outcome_part, jobs)
        for condition, part in parts:
            pooled[condition] = pooled[condition] + part
        return pooled
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for condition, part in pool.imap(_outcome_part, jobs):
            pooled[condition] = pooled[condition] + part
    return pooled


# --------------------------------------------------------------------------- main


def _fmt_calls(calls: Calls) -> str:
    return f"{calls.called}/{calls.runs} ({100 * calls.rate:.1f} %, p {calls.p_above:.3f})"


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=20, help="simulated hosts per condition")
    p.add_argument("--seed", type=int, default=0, help="first host's seed")
    p.add_argument("--break", dest="rule", choices=BROKEN_RULES, help="switch one rule off")
    p.add_argument("--processes", type=int, default=2, help="processes to spread hosts over")
    args = p.parse_args()
    hosts = 1 if args.quick else args.hosts
    session = C.Session("sim_promises", args)
    started = time.perf_counter()
    group, warm = sizes(args.quick)
    per_period = 1 if args.quick else 2
    found = outcomes(
        list(CONDITIONS),
        hosts,
        args.seed,
        processes=args.processes,
        rule=args.rule,
        quick=args.quick,
    )
    with broken(args.rule):
        by_period = {
            period: share_labelled(
                neighbour_runs(toggled_every(period), hosts, per_period, 0, args.seed)
            )
            for period in TOGGLE_PERIODS
        }
    quiet = found["quiet"]
    text, aa, outside = quiet.text, quiet.aa, quiet.outside
    coverage = {case: quiet.coverage_of(case) for case in CASES}
    rows = [
        [
            "quiet: labelled (false alarm)",
            f"{100 * quiet.share_labelled:.1f} %",
            f"≤ {100 * FALSE_ALARM_LIMIT:.0f} %",
        ],
        ["quiet: Text called", _fmt_calls(text), f"≤ {100 * CALL_RATE:.0f} % (p ≥ {CALL_TEST_P})"],
        ["quiet: A/A called", _fmt_calls(aa), f"≤ {100 * CALL_RATE:.0f} % (p ≥ {CALL_TEST_P})"],
        ["quiet: estimates outside their interval", str(len(outside)), "0"],
        *[
            [f"quiet: cross-coverage, {case}", f"{value:.3f}", f"≥ {COVERAGE_TARGET}"]
            for case, value in coverage.items()
        ],
        *[
            [f"{what}: labelled", f"{100 * found[name].share_labelled:.1f} %", "100 %"]
            for name, what in (
                ("always", "always-on neighbour"),
                ("bursts", "bursts"),
                ("toggled", "neighbour toggled every 0.3 s"),
            )
        ],
        *[
            [f"toggled every {period:g} s: labelled", f"{100 * share:.0f} %", "(no target)"]
            for period, share in by_period.items()
        ],
    ]
    runs = sum(o.runs for o in found.values()) + hosts * warm
    runs += per_period * hosts * len(TOGGLE_PERIODS)
    note = (
        f"{hosts} simulated hosts per condition, {group} runs each (cases {', '.join(CASES)}, "
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
            "text": {"called": text.called, "runs": text.runs},
            "aa": {"called": aa.called, "runs": aa.runs},
            "outside": outside,
            "coverage": coverage,
            **{name: found[name].share_labelled for name in ("always", "bursts", "toggled")},
            "toggled_by_period": {str(period): share for period, share in by_period.items()},
        },
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
