"""The kit's promises as operating characteristics, over hundreds of seeded runs of its own
pipeline on the simulated host (embedbench.sim): no real timing, the same answer on
every machine. The conditions and counts are benchmarks/sim_promises.py's, which prints
them (docs/method.md, "What the tests promise")."""

from __future__ import annotations

import pytest
from helpers import bench_module

promises = bench_module("sim_promises")
HOSTS = 20  # x 10 runs: 200 runs per condition


@pytest.fixture(scope="module")
def quiet():
    return promises.quiet_runs(HOSTS)


@pytest.fixture(scope="module")
def always():
    return promises.neighbour_runs(
        promises.ALWAYS, HOSTS, promises.GROUP // 2, promises.WARM, seed=100
    )


def test_quiet_hosts_are_rarely_labelled(quiet):
    assert len(quiet) == 200
    assert promises.share_labelled([r for _, r in quiet]) <= promises.FALSE_ALARM_LIMIT


def test_text_and_aa_call_no_direction_beyond_the_intervals_level(quiet):
    text, aa = promises.text_calls(quiet), promises.aa_calls(quiet)
    assert text.runs >= 180 and aa.runs >= 360
    assert text.kept, text  # not significantly above 5 % of unlabelled runs
    assert aa.kept, aa


def test_every_estimate_lies_inside_its_own_interval(quiet):
    assert promises.estimates_outside(quiet) == []


@pytest.mark.parametrize("case", promises.CASES)
def test_a_rerun_lands_inside_the_interval(quiet, case):
    assert promises.cross_coverage(quiet, case) >= promises.COVERAGE_TARGET


def test_an_always_on_neighbour_is_labelled_in_every_run(always):
    assert len(always) == 100
    assert promises.share_labelled(always) == 1.0


def test_without_the_stored_reference_the_always_on_neighbour_goes_unseen():
    # The rule that keeps the promise above: switched off, the neighbour is missed.
    with promises.broken("reference"):
        runs = promises.neighbour_runs(promises.ALWAYS, 2, 3, promises.WARM, seed=100)
    assert promises.share_labelled(runs) < 0.5
