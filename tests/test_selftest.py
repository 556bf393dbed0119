"""The self-test: its pure parts, a run on the real harness, and each harness defect it
must catch.

The self-test's decisions are statistical, so they are tested on a seeded host
(``seeded_host``): the carriers' clock and every clock the harness reads are one seeded
clock (tests/helpers.py), on which a spin, a hash and a sleep cost what they are told,
with seeded noise on the hash. There it passes, and each defect injected into test
doubles of the harness (monkeypatched pieces of the timing, the schedule, the records
and the statistics) fails it, naming the check that caught it, the same way on every
machine. On the real harness only its structure is checked: which checks ran, and the
two that do not depend on the host's noise.
"""

import dataclasses
import gc
import json
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import StepClock

from embedbench import measure, selftest
from embedbench.harness import carriers, stats, timing
from embedbench.harness import clock as clock_seam

# Short, so that each run of all five checks takes a few seconds on the real harness.
RUN_DESIGN = {"base_us": 500.0, "warmup": 5, "blocks": 10, "iterations": 10, "allow_busy": True}
CHECKS = ["arithmetic", "real work", "schedule and labels", "interval size", "host column"]
# The seeded host's BLAKE2b rate (ns per byte) and each hash call's noise (lognormal sigma).
HASH_NS_PER_BYTE = 0.5
HASH_NOISE = 0.02


class _NoCanary:
    """The canary when it is off (EMBEDBENCH_CANARY=off): nothing is read or allocated."""

    def __init__(self, **_kwargs: object) -> None:
        pass

    def describe(self) -> dict[str, object]:
        return {"kind": "off"}


@pytest.fixture
def seeded_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[StepClock]:
    """The self-test on a seeded clock: the carriers' spins, sleeps and calibration loops
    read it, their hash work spends HASH_NS_PER_BYTE a byte on it, and the harness times
    with it (each clock read costs 2 µs, so that a spin is a few hundred reads)."""
    clock = StepClock(seed=0, read_ns=2000)
    monkeypatch.setattr(carriers, "time", clock.time)

    def hash_work(nbytes: int) -> carriers.Call:
        return clock.work(nbytes * HASH_NS_PER_BYTE / 1e3, jitter=HASH_NOISE)

    monkeypatch.setattr(carriers, "hash_work", hash_work)
    # What costs real time and not the seeded clock's: the canary (it reads real memory)
    # and the full collections before each pinned section and after each pair.
    monkeypatch.setenv(measure.CANARY_ENV, "off")
    monkeypatch.setattr(measure, "Canary", _NoCanary)
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    with clock_seam.using(clock):
        yield clock


def _run(seed: int = 0) -> selftest.SelfTestResult:
    return selftest.run_selftest(50.0, seed=seed, **RUN_DESIGN)


def _evaluate(host: dict[str, float], *args, **kwargs) -> dict:
    """``selftest.evaluate`` with the headline taken as the PR's statistic of ``host``."""
    reduction = stats.reduction_pct(host["baseline"], host["fixed"])
    return selftest.evaluate(host, *args, reduction_pct=reduction, **kwargs)


def test_spin_waits_at_least_its_duration():
    import time

    start = time.perf_counter_ns()
    carriers.spin_us(200.0)
    assert time.perf_counter_ns() - start >= 200_000


def test_evaluate_passes_a_recovered_difference_inside_the_interval():
    # Baseline 550 µs, fixed 500 µs: 50 µs = 9.09 % of the baseline.
    judged = _evaluate({"baseline": 550.0, "fixed": 500.0}, (8.0, 10.0), 50.0)
    assert judged["injected_pct"] == pytest.approx(100 * 50 / 550)
    assert judged["recovered_us"] == pytest.approx(50.0)
    assert judged["ci95_us"] == pytest.approx((44.0, 55.0))
    assert judged["inside_interval"] and judged["within_tolerance"] and judged["passed"]


def test_evaluate_fails_an_interval_that_misses_or_an_estimate_that_is_off():
    host = {"baseline": 550.0, "fixed": 500.0}
    missed = _evaluate(host, (9.2, 9.4), 50.0)
    assert not missed["inside_interval"] and not missed["passed"]
    # The timer resolution widens the interval: 9.2 % of 550 = 50.6 µs, minus 1 µs.
    assert _evaluate(host, (9.2, 9.4), 50.0, resolution_us=1.0)["passed"]
    off = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0)
    assert off["inside_interval"] and off["error_pct"] == pytest.approx(20.0)
    assert not off["within_tolerance"] and not off["passed"]
    # A truth known only to ±3 µs allows 7.5 + 3 µs of error: 10 µs is inside, and the
    # interval is widened by the same 3 µs; ±2 µs allows 9.5 µs and 10 µs is outside.
    assert off["allowed_error_us"] == pytest.approx(7.5)
    loose = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0, resolution_us=3.0)
    assert loose["allowed_error_us"] == pytest.approx(10.5) and loose["passed"]
    tight = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0, resolution_us=2.0)
    assert not tight["within_tolerance"] and not tight["passed"]
    with pytest.raises(ValueError):
        _evaluate(host, (8.0, 10.0), 50.0, resolution_us=-1.0)


def test_the_call_log_reads_block_orders_and_refuses_a_mixed_run():
    log = carriers.CallLog()
    a, b = log.carrier("baseline", lambda: None), log.carrier("fixed", lambda: None)
    for fn in (a, b, a, a, b, b):  # the work ledger's untimed call, then 2 warm-ups each
        fn()
    for first, second in ((a, b), (b, a), (b, a), (a, b)):
        for fn in (first, first, first, second, second, second):
            fn()
    assert log.block_orders(warmup=2, iterations=3) == [
        ("baseline", "fixed"),
        ("fixed", "baseline"),
        ("fixed", "baseline"),
        ("baseline", "fixed"),
    ]
    a()  # one call too many: no longer whole blocks
    assert log.block_orders(warmup=2, iterations=3) is None
    without_ledger = carriers.CallLog(names=log.names[2:-1])  # the ledger's calls missing
    assert without_ledger.block_orders(warmup=2, iterations=3) is None


def test_the_plain_loop_measures_a_spin_difference(seeded_host):
    calibration = carriers.difference_us(carriers.spinner(80.0), carriers.spinner(30.0))
    # Each spin ends at the first clock read past its deadline: 2 µs a read here.
    assert calibration.difference_us == pytest.approx(50.0, abs=2.0)
    assert len(calibration.rounds_us) == 9


def test_hash_work_is_sized_from_one_rate():
    # Sizing is arithmetic on one probed rate, so ratios are exact; two separate probes
    # on a busy host once differed by more than 25 %.
    assert carriers.bytes_for_us(50.0, 0.5) == 100_000
    assert carriers.bytes_for_us(200.0, 0.5) == 4 * carriers.bytes_for_us(50.0, 0.5)
    assert carriers.bytes_for_us(1e-9, 0.5) == 1
    with pytest.raises(ValueError):
        carriers.bytes_for_us(0.0, 0.5)
    with pytest.raises(ValueError):
        carriers.bytes_for_us(10.0, 0.0)
    rate = carriers.hash_ns_per_byte()
    assert rate > 0
    carriers.hash_work(carriers.bytes_for_us(200.0, rate))()  # runs


def test_bad_delays_are_refused():
    with pytest.raises(ValueError):
        selftest.run_selftest(0.0)
    with pytest.raises(ValueError):
        selftest.run_selftest(10.0, base_us=-1.0)


@pytest.mark.parametrize("n", [5, 10, 20])
def test_the_inverted_test_is_the_harness_interval_even_with_slow_blocks(n):
    # Two slow blocks of ten widen a rank interval far past what the blocks' sd or MAD
    # suggest; the recomputation by test inversion must still land on the same ends.
    rng = np.random.default_rng(n)
    for trial in range(20):
        d = 0.01 + 0.02 * rng.standard_t(3, size=n)
        if trial % 2:
            d[:2] += 0.25
        expected = selftest.inverted_signed_rank_interval(d, stats.CONFIDENCE)
        assert stats.hodges_lehmann(d).ci == pytest.approx(expected, abs=1e-12)


def test_the_inverted_test_rejects_a_shift_far_outside():
    d = np.array([0.10, 0.11, 0.12, 0.09, 0.10, 0.13, 0.08, 0.11, 0.10, 0.12])
    low, high = selftest.inverted_signed_rank_interval(d, 0.95)
    assert 0.08 < low < 0.10 < high < 0.13


def test_the_selftest_passes_on_the_seeded_host(seeded_host):
    result = _run()
    assert result.passed, "\n".join(result.lines())
    assert [c.name for c in result.checks] == CHECKS
    assert result.check("schedule and labels").numbers["baseline_first"] == 5
    # The arithmetic and the sleep are recovered to within the clock reads' cost.
    arithmetic = result.check("arithmetic").numbers
    assert arithmetic["recovered_us"] == pytest.approx(50.0, abs=2.0)
    assert result.check("host column").numbers["recovered_us"] == pytest.approx(200.0, abs=4.0)
    assert result.check("real work").numbers["undecided_blocks"] == []
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert row["passed"] is True and row["design"]["blocks"] == 10
    assert row["design"]["real_work_blocks"] == 10
    assert result.lines()[0] == "self-test PASSED: 5 of 5 checks"


def test_the_selftest_on_the_real_harness_reports_every_check():
    # Real timing: whether the arithmetic, real-work and host-column checks pass is the
    # host's noise of the day; what is checked is that every check ran and was decided
    # one way or another, and the two checks that hold whatever the timings were.
    result = _run()
    assert [c.name for c in result.checks] == CHECKS
    for check in result.checks:
        assert check.passed in (True, False) and check.inconclusive in (True, False)
        assert not (check.passed and check.inconclusive)
        assert check.line().startswith(("  ok   ", "  FAIL ", "  ??   ")), check.line()
        assert check.line().endswith(check.detail) and check.detail
    blocks = result.design["real_work_blocks"]
    assert blocks in (10, 20, 40)  # 10, then twice and four times as many if undecided
    schedule = result.check("schedule and labels")
    assert schedule.passed, schedule.detail
    assert schedule.numbers["baseline_first"] == blocks // 2
    assert schedule.numbers["mislabelled_blocks"] == []
    interval = result.check("interval size")
    assert interval.passed and interval.numbers["blocks"] == blocks, interval.detail
    state = "PASSED" if result.passed else "INCONCLUSIVE" if result.inconclusive else "FAILED"
    assert result.lines()[0].startswith(f"self-test {state}")
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert row["passed"] is result.passed and row["inconclusive"] is result.inconclusive
    assert row["design"]["blocks"] == 10 and row["design"]["timer_resolution_us"] >= 0
    assert result.host_stability is not None


def _failed(result: selftest.SelfTestResult) -> set[str]:
    return {c.name for c in result.checks if not c.passed}


def test_swapped_labels_are_caught(seeded_host, monkeypatch):
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


def test_a_biased_block_order_is_caught(seeded_host, monkeypatch):
    monkeypatch.setattr(
        timing, "block_schedule", lambda names, blocks, seed: [tuple(names)] * blocks
    )
    result = _run()
    assert _failed(result) == {"schedule and labels"}
    assert result.design["real_work_blocks"] == 10
    assert "baseline ran first in 10 of 10 blocks (must be 5)" in (
        result.check("schedule and labels").detail
    )


def test_the_wrong_metric_column_is_caught(seeded_host, monkeypatch):
    real = timing.time_calls

    def cpu_first(fn, count, sync=timing.no_sync, window=timing.DEFAULT_WINDOW):
        return [[cpu, host, done] for host, cpu, done in real(fn, count, sync, window)]

    monkeypatch.setattr(timing, "time_calls", cpu_first)
    result = _run()
    # The sleep is off the CPU: the CPU-time column recovers none of it.
    assert _failed(result) == {"host column"}
    assert result.check("host column").numbers["recovered_us"] == pytest.approx(0.0, abs=4.0)


@pytest.mark.parametrize("factor", [0.1, 1.5, 10.0], ids=["too-narrow", "wider", "too-wide"])
def test_a_wrongly_sized_interval_is_caught(seeded_host, monkeypatch, factor):
    real = stats.hodges_lehmann_interval

    def resized(*args, **kwargs):
        interval = real(*args, **kwargs)
        centre = (interval.low + interval.high) / 2
        half = (interval.high - interval.low) / 2 * factor
        return dataclasses.replace(interval, low=centre - half, high=centre + half)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", resized)
    result = _run()
    assert "interval size" in _failed(result)


def test_an_interval_past_a_full_reduction_fails_the_check_instead_of_crashing(
    seeded_host, monkeypatch
):
    real = stats.hodges_lehmann_interval

    def past_full(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), high=150.0)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", past_full)
    result = _run()
    assert "interval size" in _failed(result)
    assert result.check("interval size").numbers["ratio"] == float("inf")


def _noisy_real_work(monkeypatch, noisy_designs: int) -> list[int]:
    """Make the real-work pair's first ``noisy_designs`` designs noisy: each block's
    baseline shifted by up to half its time, up in four blocks of five and down in the fifth, so
    the median of block medians is off while the interval, wide, still holds the truth.
    Returns the block counts the real-work pair was timed with."""
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
                up = record.block % 5 != 0
                factor = 1.25 if up else 0.5
                record.samples_us = [[s[0] * factor, *s[1:]] for s in record.samples_us]
        return records

    monkeypatch.setattr(measure, "measure_pair", noisy)
    return designs


def test_a_real_work_check_too_noisy_to_decide_is_timed_again_with_more_blocks(
    seeded_host, monkeypatch
):
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


def test_a_real_work_check_never_decided_is_inconclusive_not_failed(seeded_host, monkeypatch):
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


def test_evaluate_calls_a_miss_inside_a_wide_interval_undecided_not_a_narrow_one():
    host = {"baseline": 600.0, "fixed": 530.0}  # recovered 70 µs against a truth of 50
    wide = _evaluate(host, (5.0, 20.0), 50.0)  # [30, 120] µs: half-width 45
    assert not wide["passed"] and wide["inside_interval"] and wide["undecided"]
    narrow = _evaluate(host, (8.0, 12.0), 50.0)  # [48, 72] µs: half-width 12 > 7.5
    assert narrow["inside_interval"] and narrow["undecided"]
    tighter = _evaluate(host, (8.2, 9.3), 50.0)  # [49.2, 55.8] µs: half-width 3.3
    assert tighter["inside_interval"] and not tighter["within_tolerance"]
    assert not tighter["undecided"]  # off by more than the interval allows: a failure
    missed = _evaluate(host, (10.0, 25.0), 50.0)  # [60, 150] µs misses 50
    assert not missed["inside_interval"] and not missed["undecided"]
