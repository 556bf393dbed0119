"""The operating point of every host-stability threshold, on the simulated host.

Each rule of the verdict (``embedbench/harness/stability.py``, where every threshold has
its one home and its reason) reads one statistic of a run. This script runs seeded
simulated runs of the kit's own pipeline on quiet hosts and on the noisy condition each
rule is for, reads the statistic back from each run's ``host_stability`` and
``host_probes``, and prints, for the kit's threshold and for half, three quarters, one
and a half and twice it, the share of quiet runs it would label (false alarms) and of
noisy runs it would label (detection). A rule fires on a run when its statistic is above
the threshold (for the rank-sum p: below it) anywhere in the run: any worker, any probe.

Conditions (``benchmarks/sim_promises.py``'s): quiet hosts; off-CPU bursts taking about
15 % of the measuring core (the probes' off-CPU share, their spread, the waits, the
preempted share); a memory neighbour toggled every 0.3 s (the neighbour contrasts, the
workers' spreads and levels); an always-on neighbour after 5 quiet runs (the stored
reference).

``--quick`` (a smoke run): one host per condition, ``sim_promises.QUICK_GROUP`` runs on it
after ``sim_promises.QUICK_WARM`` quiet ones where a reference is needed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import _common as C
import sim_promises as P

from embedbench.harness import stability
from embedbench.harness.preemption import PREEMPTED_LIMIT

SCALES = (0.5, 0.75, 1.0, 1.5, 2.0)


def _probes(result: Any) -> list[dict[str, Any]]:
    return result.metadata.get("host_probes") or []


def _host(result: Any) -> dict[str, Any]:
    return result.metadata["host_stability"]


def _most(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


@dataclass(frozen=True)
class Rule:
    """One threshold: its name, value, the noisy condition it is for and its statistic."""

    name: str
    threshold: float
    condition: str
    statistic: Callable[[Any], float | None]
    below: bool = False  # fires when the statistic is below the threshold (a p-value)


def _neighbour(field: str, key: str) -> Callable[[Any], float | None]:
    def read(result: Any) -> float | None:
        contrast = _host(result).get(field) or {}
        return contrast.get(key)

    return read


def _reference_over(result: Any) -> float | None:
    reference = _host(result).get("host_reference") or {}
    over, limit = reference.get("over"), reference.get("limit")
    # The rule compares with a limit that follows the reference's spread; over / limit
    # puts every run on one scale, where 1.0 is the kit's limit.
    return None if over is None or not limit else over / limit


RULES = (
    Rule(
        "probe_off_cpu",
        stability.PROBE_OFF_CPU_LIMIT,
        "bursts",
        lambda r: _most([p.get("off_cpu") for p in _probes(r)]),
    ),
    Rule(
        "probe_spread",
        stability.PROBE_SPREAD_LIMIT,
        "bursts",
        lambda r: _most([p.get("spread") for p in _probes(r)]),
    ),
    Rule(
        "probes_waited",
        float(stability.WAITED_PROBES_LIMIT),
        "bursts",
        lambda r: float(_host(r).get("probes_waited") or 0),
    ),
    Rule(
        "preempted",
        PREEMPTED_LIMIT,
        "bursts",
        lambda r: _most(list((_host(r).get("preempted") or {}).values())),
    ),
    Rule(
        "run_spread",
        stability.RUN_SPREAD_LIMIT,
        "toggled",
        lambda r: _most([w.get("spread") for w in _host(r).get("workers") or []]),
    ),
    Rule(
        "neighbour_effect (canary)",
        stability.NEIGHBOUR_EFFECT_LIMIT,
        "toggled",
        _neighbour("neighbour", "effect"),
    ),
    Rule(
        "neighbour_effect (calls)",
        stability.NEIGHBOUR_EFFECT_LIMIT,
        "toggled",
        _neighbour("neighbour_calls", "effect"),
    ),
    Rule("reference_level (over / limit)", 1.0, "always", _reference_over),
)


def fires(rule: Rule, value: float | None, threshold: float) -> bool:
    """Whether ``rule`` labels a run whose statistic is ``value`` at ``threshold``."""
    if value is None:
        return False
    return value < threshold if rule.below else value > threshold


def operating_points(rule: Rule, quiet: Sequence[Any], noisy: Sequence[Any]) -> list[list]:
    """Rows of (threshold, false alarms, detection) at each of ``SCALES``."""
    quiet_values = [rule.statistic(r) for r in quiet]
    noisy_values = [rule.statistic(r) for r in noisy]
    rows = []
    for scale in SCALES:
        threshold = rule.threshold * scale
        false_alarm = sum(fires(rule, v, threshold) for v in quiet_values) / len(quiet)
        detection = sum(fires(rule, v, threshold) for v in noisy_values) / len(noisy)
        mark = " (the kit's)" if scale == 1.0 else ""
        rows.append(
            [f"{threshold:g}{mark}", f"{100 * false_alarm:.0f} %", f"{100 * detection:.0f} %"]
        )
    return rows


def sole_catches(runs: Sequence[Any]) -> dict[str, int]:
    """For each rule, the runs of ``runs`` that it alone labels at the kit's thresholds:
    what the verdict would lose without it (a rule with none on every condition asks a
    question another rule already answers, on this simulator)."""
    alone = {rule.name: 0 for rule in RULES}
    for run in runs:
        fired = [rule.name for rule in RULES if fires(rule, rule.statistic(run), rule.threshold)]
        if len(fired) == 1:
            alone[fired[0]] += 1
    return alone


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=10, help="simulated hosts per condition")
    p.add_argument("--seed", type=int, default=0, help="first host's seed")
    args = p.parse_args()
    hosts = 1 if args.quick else args.hosts
    session = C.Session("sim_thresholds", args)
    group, warm = P.sizes(args.quick)
    started = time.perf_counter()
    quiet = [r for _, r in P.quiet_runs(hosts, args.seed, group)]
    noisy = {
        "bursts": P.neighbour_runs(P.BURSTS, hosts, group, 0, args.seed),
        "toggled": P.neighbour_runs(P.TOGGLED, hosts, group, 0, args.seed),
        "always": P.neighbour_runs(P.ALWAYS, hosts, group, warm, args.seed),
    }
    quiet_with_reference = P.neighbour_runs(P.QUIET, hosts, group, warm, args.seed + 500)
    sections, data = [], {}
    for rule in RULES:
        baseline = quiet_with_reference if rule.condition == "always" else quiet
        rows = operating_points(rule, baseline, noisy[rule.condition])
        data[rule.name] = rows
        sections.append(
            C.Section(
                f"{rule.name}: quiet against {rule.condition}",
                C.markdown_table(
                    ["threshold", "false alarms (quiet)", f"detection ({rule.condition})"],
                    rows,
                    align="rrr",
                ),
            )
        )
    note = (
        f"{hosts} simulated hosts per condition, {group} runs each (cases "
        f"{', '.join(P.CASES)}, default design), seeds from {args.seed}; "
        f"{time.perf_counter() - started:.0f} s."
    )
    conditions = {**noisy, "quiet": quiet}
    alone = {name: sole_catches(runs) for name, runs in conditions.items()}
    sections.append(
        C.Section(
            "Runs each rule alone labels, at the kit's thresholds",
            C.markdown_table(
                ["rule", *conditions],
                [[rule.name, *(str(alone[c][rule.name]) for c in conditions)] for rule in RULES],
                align="l" + "r" * len(conditions),
            ),
            note,
        )
    )
    C.publish(session, sections, {"hosts": hosts, "rules": data, "alone": alone})


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
