"""The self-test: its pure parts, a real run, and each harness defect it must catch.

The defects are injected into test doubles of the harness (monkeypatched pieces of the
timing, the schedule, the records and the statistics); the self-test, run as a user runs
it, must fail on each and name the check that caught it.
"""

import dataclasses
import json
import warnings

import numpy as np
import pytest

# Short, so that each run of all five checks takes a few seconds.
from embedbench import runner, selftest
from embedbench.harness import carriers, stats, timing

RUN_DESIGN = {"base_us": 500.0, "warmup": 5, "blocks": 10, "iterations": 10, "allow_busy": True}


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
    for fn in (a, a, b, b):  # warm-up: 2 calls each
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


def test_the_plain_loop_measures_a_spin_difference():
    calibration = carriers.difference_us(carriers.spinner(80.0), carriers.spinner(30.0))
    assert calibration.difference_us == pytest.approx(50.0, abs=5.0)
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


def test_the_selftest_passes_on_the_real_harness():
    # Load from outside this test (other processes, the host's own speed changing within
    # seconds) can move one run's truth or its reading; three attempts are allowed (on a
    # noisy 2-core guest one attempt in four failed), the harness must pass one of them,
    # or be inconclusive: real work timed at 10, 20 and 40 blocks with an interval each
    # time wider than ±15 % that holds the truth (a CI run on a noisy host: recovered
    # +36 %, interval [45, 109] µs around a truth of 48 µs). No check may fail.
    for seed in range(3):
        result = _run(seed)
        if result.passed:
            break
    assert result.passed or result.inconclusive, "\n".join(result.lines())
    if result.inconclusive:
        warnings.warn("\n".join(result.lines()), stacklevel=1)
        real = result.check("real work")
        assert real.inconclusive and real.numbers["undecided_blocks"] == [10, 20]
        return
    names = [c.name for c in result.checks]
    assert names == [
        "arithmetic",
        "real work",
        "schedule and labels",
        "interval size",
        "host column",
    ]
    assert result.check("schedule and labels").numbers["baseline_first"] == 5
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert row["passed"] is True and row["design"]["blocks"] == 10
    assert result.lines()[0] == "self-test PASSED: 5 of 5 checks"


def _failed(result: selftest.SelfTestResult) -> set[str]:
    return {c.name for c in result.checks if not c.passed}


def test_swapped_labels_are_caught(monkeypatch):
    real = runner.measure_pair

    def swapped(variants, **kwargs):
        records = real(variants, **kwargs)
        for record in records:
            record.variant = {"baseline": "fixed", "fixed": "baseline"}[record.variant]
        return records

    monkeypatch.setattr(runner, "measure_pair", swapped)
    result = _run()
    assert not result.passed
    assert {"arithmetic", "real work", "schedule and labels"} <= _failed(result)
    assert result.lines()[0].startswith("self-test FAILED: arithmetic")


def test_a_biased_block_order_is_caught(monkeypatch):
    monkeypatch.setattr(
        timing, "block_schedule", lambda names, blocks, seed: [tuple(names)] * blocks
    )
    result = _run()
    assert "schedule and labels" in _failed(result)
    # Real work may have been timed again with more blocks (a noisy host): all of them.
    blocks = result.design["real_work_blocks"]
    assert f"baseline ran first in {blocks} of {blocks} blocks" in (
        result.check("schedule and labels").detail
    )


def test_the_wrong_metric_column_is_caught(monkeypatch):
    real = timing.time_calls

    def cpu_first(fn, count, sync=timing.no_sync, window=timing.DEFAULT_WINDOW):
        return [[cpu, host, done] for host, cpu, done in real(fn, count, sync, window)]

    monkeypatch.setattr(timing, "time_calls", cpu_first)
    result = _run()
    assert "host column" in _failed(result)


@pytest.mark.parametrize("factor", [0.1, 1.5, 10.0], ids=["too-narrow", "wider", "too-wide"])
def test_a_wrongly_sized_interval_is_caught(monkeypatch, factor):
    real = stats.hodges_lehmann_interval

    def resized(*args, **kwargs):
        interval = real(*args, **kwargs)
        centre = (interval.low + interval.high) / 2
        half = (interval.high - interval.low) / 2 * factor
        return dataclasses.replace(interval, low=centre - half, high=centre + half)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", resized)
    result = selftest.run_selftest(50.0, seed=0, **RUN_DESIGN)
    assert "interval size" in _failed(result)


def test_an_interval_past_a_full_reduction_fails_the_check_instead_of_crashing(monkeypatch):
    real = stats.hodges_lehmann_interval

    def past_full(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), high=150.0)

    monkeypatch.setattr(stats, "hodges_lehmann_interval", past_full)
    result = selftest.run_selftest(50.0, seed=0, **RUN_DESIGN)
    assert "interval size" in _failed(result)


def _noisy_real_work(monkeypatch, noisy_designs: int) -> list[int]:
    """Make the real-work pair's first ``noisy_designs`` designs noisy: each block's
    baseline shifted by up to half its time, up in four blocks of five and down in the fifth, so
    the median of block medians is off while the interval, wide, still holds the truth.
    Returns the block counts the real-work pair was timed with."""
    real = runner.measure_pair
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

    monkeypatch.setattr(runner, "measure_pair", noisy)
    return designs


def test_a_real_work_check_too_noisy_to_decide_is_timed_again_with_more_blocks(monkeypatch):
    # Off by more than ±15 %, inside a wide interval: neither harness nor host is shown
    # wrong at 10 blocks, so the pair is timed again with 20, untouched, which decides
    # (or, on a host whose own noise is that wide, is timed once more with 40).
    designs = _noisy_real_work(monkeypatch, noisy_designs=1)
    result = _run()
    assert designs[:2] == [10, 20]
    check = result.check("real work")
    assert check.numbers["undecided_blocks"] == designs[:-1]
    # The design that decided was timed for real, untouched, on this host: whether it
    # then passed is the real-work check's own accuracy on the host of the day (under the
    # full suite's load here it missed in 2 of 2 CI runs, and passed in 8 of 8 alone).
    # What this test owns is that it was timed again and reported as the one that decided.
    assert not check.numbers["undecided"] or designs[-1] == 40, check.detail
    assert f"{designs[-1]} blocks, after {len(designs) - 1} undecided design" in check.detail
    assert result.design["real_work_blocks"] == designs[-1]
    # The schedule check reads the design that decided.
    half = designs[-1] // 2
    assert f"baseline ran first in {half} of {designs[-1]} blocks" in (
        result.check("schedule and labels").detail
    )


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
