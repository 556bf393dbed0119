"""The self-test on the simulated host (``embedbench.sim.simulate_selftest``), and the
carriers' one clock seam.

The self-test's decisions are statistical, so they are tested where the noise is seeded:
the kit's own ``run_selftest`` in this process, its spins, sleeps and calibration loops
on the simulated clock, its hash work spent as simulated work (the host's noise,
fluctuation, drift and outliers land on it), and every clock the harness reads the same
one. There it passes for every seed, recovers what is planted, and fails on each defect
injected into the harness (monkeypatched pieces of the timing, the schedule, the records
and the statistics), naming the check that caught it, the same way on every machine.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import StepClock

from embedbench import measure, selftest
from embedbench.harness import carriers, clock, stats, timing
from embedbench.sim import SimulatedHost, Simulation, simulate_selftest

# A short design: each self-test takes about a tenth of a second on the simulated host.
RUN_DESIGN = {"base_us": 500.0, "warmup": 5, "blocks": 10, "iterations": 10, "allow_busy": True}
DELAY_US = 50.0
CHECKS = ["arithmetic", "real work", "schedule and labels", "interval size", "host column"]
SEEDS = range(20)


def _run(seed: int = 0, host: SimulatedHost | None = None) -> selftest.SelfTestResult:
    return simulate_selftest(host or SimulatedHost(), seed, DELAY_US, **RUN_DESIGN)


def _failed(result: selftest.SelfTestResult) -> set[str]:
    return {c.name for c in result.checks if not c.passed}


# -- the carriers read the clock in force ---------------------------------------------------


def test_the_carriers_spin_sleep_and_calibrate_on_the_clock_in_force():
    seeded = StepClock(seed=0, read_ns=2000)
    with clock.using(seeded):
        calibration = carriers.difference_us(carriers.spinner(80.0), carriers.spinner(30.0))
        # Each spin ends at the first clock read past its deadline: 2 µs a read here.
        assert calibration.difference_us == pytest.approx(50.0, abs=2.0)
        assert len(calibration.rounds_us) == carriers.CALIBRATION_ROUNDS
        before = seeded.t_ns, seeded.cpu_ns
        carriers.sleep_us(300.0)()
        assert (seeded.t_ns - before[0], seeded.cpu_ns - before[1]) == (300_000, 0)
        # The rate probe times the hash work it is given, on the same clock.
        rate = carriers.hash_ns_per_byte(lambda nbytes: seeded.work(nbytes * 0.5 / 1e3))
        assert rate == pytest.approx(0.5, rel=0.02)
    assert clock.now() is clock.REAL_CLOCK


def test_the_simulated_spin_costs_what_a_deadline_loop_on_its_clock_costs():
    sim = Simulation(SimulatedHost(), seed=0)
    try:
        ticks = sim.clock
        with clock.using(ticks):
            start = ticks.t_ns
            carriers.spin_us(80.0)  # the real loop: hundreds of reads of the simulated clock
            looped = ticks.t_ns - start
            start = ticks.t_ns
            ticks.spin(80.0)  # its shortcut: the deadline's read and the one past it
            shortcut = ticks.t_ns - start
    finally:
        sim.close()
    read = SimulatedHost().perf_read_ns
    assert 80_000 <= looped <= 80_000 + 2 * read
    assert 80_000 <= shortcut <= 80_000 + 2 * read


# -- the self-test on a quiet simulated host ------------------------------------------------


def test_the_selftest_passes_on_a_quiet_simulated_host_over_seeds():
    # Measured over 200 seeds at this design: 196 passed, none was inconclusive, and 4
    # failed the real-work check alone, each by an interval that missed the plain loop's
    # truth even widened by that truth's own error (the 95 % interval held the planted
    # ratio in 143 of 150). So at most one seed in 20 may fail, and only that check.
    results = {seed: _run(seed) for seed in SEEDS}
    failing = {s: r.failed for s, r in results.items() if not r.passed}
    assert not any(r.inconclusive for r in results.values())
    assert set(failing.values()) <= {("real work",)}, failing
    assert len(failing) <= 1, failing
    assert {r.design["real_work_blocks"] for r in results.values()} == {10}


def test_the_selftest_reports_every_check_on_the_simulated_host():
    result = _run()
    assert result.passed, "\n".join(result.lines())
    assert [c.name for c in result.checks] == CHECKS
    assert result.check("schedule and labels").numbers["baseline_first"] == 5
    # The spins and the sleep cost exactly what they are told, up to a clock read.
    arithmetic = result.check("arithmetic").numbers
    assert arithmetic["recovered_us"] == pytest.approx(DELAY_US, abs=0.1)
    host_column = result.check("host column").numbers
    assert host_column["recovered_us"] == pytest.approx(selftest.SLEEP_US, rel=0.02)
    assert host_column["wall_us"] == pytest.approx(selftest.SLEEP_US, rel=0.02)
    assert result.check("real work").numbers["undecided_blocks"] == []
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert row["passed"] is True and row["design"]["blocks"] == 10
    assert row["design"]["real_work_blocks"] == 10 and row["design"]["seed"] == 0
    assert result.lines()[0] == "self-test PASSED: 5 of 5 checks"
    assert result.host_stability is not None and result.host_stability.verdict == "stable"
    assert clock.now() is clock.REAL_CLOCK  # the simulated clock is gone after it


def test_the_real_work_check_recovers_a_planted_difference():
    # A host whose speed never moves (no regimes, drift or fluctuation; per-call noise and
    # outliers kept): the hash work is sized from the rate probed on it, so its extra
    # base/10 µs is the planted difference: the plain loop's truth must find it (to its
    # own spread, a few %) and the harness recover it within the check's tolerance.
    host = SimulatedHost(run_regime=0.0, worker_regime=0.0, drift=0.0, fluctuation=0.0)
    planted = RUN_DESIGN["base_us"] / 10
    for seed in range(5):
        real = _run(seed, host).check("real work")
        numbers = real.numbers
        assert real.passed, real.detail
        assert numbers["injected_us"] == pytest.approx(planted, rel=0.05)
        assert numbers["recovered_us"] == pytest.approx(planted, rel=selftest.TOLERANCE)
        error_us = abs(numbers["recovered_us"] - numbers["injected_us"])
        assert error_us <= numbers["allowed_error_us"] and numbers["inside_interval"]


def test_the_same_seed_gives_the_same_selftest_bit_for_bit():
    first, again, other = _run(3), _run(3), _run(4)
    as_json = [json.dumps(r.to_json(), sort_keys=True) for r in (first, again, other)]
    assert as_json[0] == as_json[1]
    assert as_json[0] != as_json[2]


# -- each harness defect fails it ------------------------------------------------------------


def test_swapped_labels_are_caught(monkeypatch):
    real = measure.measure_pair

    def swapped(variants, **kwargs):
        records = real(variants, **kwargs)
        for record in records:
            record.variant = {"baseline": "fixed", "fixed": "baseline"}[record.variant]
        return records

    monkeypatch.setattr(measure, "measure_pair", swapped)
    result = _run()
    assert not result.passed
    # Every difference comes back negative: the spins', the hashes' and the sleep's.
    assert _failed(result) == {"arithmetic", "real work", "schedule and labels", "host column"}
    assert result.lines()[0] == (
        "self-test FAILED: arithmetic, real work, schedule and labels, host column"
    )


def test_a_biased_block_order_is_caught(monkeypatch):
    monkeypatch.setattr(
        timing, "block_schedule", lambda names, blocks, seed: [tuple(names)] * blocks
    )
    result = _run()
    assert _failed(result) == {"schedule and labels"}
    assert result.design["real_work_blocks"] == 10
    assert "baseline ran first in 10 of 10 blocks (must be 5)" in (
        result.check("schedule and labels").detail
    )


def test_the_wrong_metric_column_is_caught(monkeypatch):
    real = timing.time_calls

    def cpu_first(fn, count, sync=timing.no_sync, window=timing.DEFAULT_WINDOW):
        return [[cpu, host, done] for host, cpu, done in real(fn, count, sync, window)]

    monkeypatch.setattr(timing, "time_calls", cpu_first)
    result = _run()
    # The sleep is off the CPU: the CPU-time column recovers none of it.
    assert _failed(result) == {"host column"}
    assert result.check("host column").numbers["recovered_us"] == pytest.approx(0.0, abs=4.0)


@pytest.mark.parametrize("factor", [0.1, 1.5, 10.0], ids=["too-narrow", "wider", "too-wide"])
def test_a_wrongly_sized_interval_is_caught(monkeypatch, factor):
    real = stats.hodges_lehmann_interval

    def resized(*args, **kwargs):
        interval = real(*args, **kwargs)
        centre = (interval.low + interval.high) / 2
        half = (interval.high - interval.low) / 2 * factor
        return dataclasses.replace(interval, low=centre - half, high=centre + half)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", resized)
    result = _run()
    assert "interval size" in _failed(result)


def test_an_interval_past_a_full_reduction_fails_the_check_instead_of_crashing(monkeypatch):
    real = stats.hodges_lehmann_interval

    def past_full(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), high=150.0)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", past_full)
    result = _run()
    assert "interval size" in _failed(result)
    assert result.check("interval size").numbers["ratio"] == float("inf")


def _noisy_real_work(monkeypatch, noisy_designs: int) -> list[int]:
    """Make the real-work pair's first ``noisy_designs`` designs noisy: each block's
    baseline shifted by up to half its time, up in four blocks of five and down in the
    fifth, so the median of block medians is off while the interval, wide, still holds the
    truth. Returns the block counts the real-work pair was timed with."""
    real = measure.measure_pair
    designs: list[int] = []

    def noisy(variants, **kwargs):
        records = real(variants, **kwargs)
        if variants["baseline"].__qualname__ != "CallLog.carrier.<locals>.call":
            return records  # the spin and sleep pairs stay as they are
        designs.append(kwargs["blocks"])
        if len(designs) > noisy_designs:
            return records
        for record in records:
            if record.variant == "baseline":
                # Four blocks in five: the Hodges-Lehmann estimate sits among them at
                # every block count, and the interval reaches into the up-down pairs.
                factor = 1.25 if record.block % 5 != 0 else 0.5
                record.samples_us = [[s[0] * factor, *s[1:]] for s in record.samples_us]
        return records

    monkeypatch.setattr(measure, "measure_pair", noisy)
    return designs


def test_a_real_work_check_too_noisy_to_decide_is_timed_again_with_more_blocks(monkeypatch):
    # Off by more than ±15 %, inside a wide interval: neither harness nor host is shown
    # wrong at 10 blocks, so the pair is timed again with 20, untouched, which decides.
    designs = _noisy_real_work(monkeypatch, noisy_designs=1)
    result = _run()
    assert designs == [10, 20]
    check = result.check("real work")
    assert check.passed and not check.inconclusive, check.detail
    assert check.numbers["undecided_blocks"] == [10]
    assert "20 blocks, after 1 undecided design (10 blocks)" in check.detail
    assert result.design["real_work_blocks"] == 20
    assert result.passed, "\n".join(result.lines())
    # The schedule check reads the design that decided.
    assert "baseline ran first in 10 of 20 blocks" in result.check("schedule and labels").detail


def test_a_real_work_check_never_decided_is_inconclusive_not_failed(monkeypatch):
    designs = _noisy_real_work(monkeypatch, noisy_designs=selftest.REAL_WORK_ROUNDS)
    result = _run()
    assert designs == [10, 20, 40]
    check = result.check("real work")
    assert check.inconclusive and not check.passed
    assert check.numbers["inside_interval"] and not check.numbers["within_tolerance"]
    assert "undecided: the interval is wider than" in check.detail
    assert check.line().startswith("  ??   real work:")
    assert not result.passed and result.inconclusive and result.failed == ()
    assert result.lines()[0].startswith("self-test INCONCLUSIVE: real work (")
    assert result.to_json()["inconclusive"] is True
