"""The kit's promises as operating characteristics, over hundreds of seeded runs of its own
pipeline on the simulated host (embedbench.sim): no real timing, the same answer on
every machine. The conditions and counts are benchmarks/sim_promises.py's, which prints
them (docs/method.md, "What the tests promise"). The conditions' hosts are spread over
two processes (each host has its own seed, so the counts are those of one process)."""

from __future__ import annotations

import pytest
from helpers import bench_module

promises = bench_module("sim_promises")
HOSTS = 20  # x 10 runs: 200 runs per condition


@pytest.fixture(scope="module")
def found():
    return promises.outcomes(list(promises.CONDITIONS), HOSTS, processes=2)


def test_quiet_hosts_are_rarely_labelled(found):
    quiet = found["quiet"]
    assert quiet.runs == 200
    assert quiet.share_labelled <= promises.FALSE_ALARM_LIMIT


def test_text_and_aa_call_no_direction_beyond_the_intervals_level(found):
    text, aa = found["quiet"].text, found["quiet"].aa
    assert text.runs >= 180 and aa.runs >= 360
    assert text.kept, text  # not significantly above 5 % of unlabelled runs
    assert aa.kept, aa


def test_every_estimate_lies_inside_its_own_interval(found):
    assert found["quiet"].outside == []


@pytest.mark.parametrize("case", promises.CASES)
def test_a_rerun_lands_inside_the_interval(found, case):
    assert found["quiet"].coverage_of(case) >= promises.COVERAGE_TARGET


@pytest.mark.parametrize("condition", ["always", "bursts", "toggled"])
def test_a_noisy_host_is_labelled_in_every_run(found, condition):
    # always: a memory neighbour that never pauses (seen against the stored reference);
    # bursts: off-CPU bursts on the measuring core; toggled: a neighbour on and off
    # faster than a worker measures a case. Each moves the measured work by over 10 %.
    assert found[condition].runs == 200
    assert found[condition].share_labelled == 1.0


@pytest.mark.parametrize(
    ("rule", "condition"),
    [("reference", "always"), ("preempted", "bursts"), ("neighbour", "toggled")],
)
def test_with_its_rule_switched_off_a_noisy_host_goes_unseen(rule, condition):
    # The rule that keeps each promise above: switched off, runs go unlabelled.
    missed = promises.outcome(condition, range(2), rule=rule)
    assert missed.share_labelled < 1.0


def test_without_the_block_noise_floor_the_intervals_cover_a_rerun_less_often():
    # The floor that keeps cross-coverage: an interval without it covers fewer reruns.
    kept = promises.outcome("quiet", range(4))
    broken = promises.outcome("quiet", range(4), rule="floor")
    for case in promises.CASES:
        assert broken.coverage_of(case) < kept.coverage_of(case)
