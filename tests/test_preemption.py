"""The preempted share: time the measuring thread lost off the CPU inside timed calls."""

import numpy as np
import pytest
from helpers import StepClock

from embedbench.harness import clock as clock_seam
from embedbench.harness import preemption, stability


def _record(worker: int, host_cpu: list[tuple[float, float]], device: str = "cpu") -> dict:
    return {
        "worker": worker,
        "device": device,
        "case": "text",
        "tokens": 300,
        "scope": "whole_wrapper",
        "samples_us": [[h, c, 0.0] for h, c in host_cpu],
    }


def _steady(n: int = 20, host: float = 600.0, off: float = 0.5) -> list[tuple[float, float]]:
    return [(host, host - off)] * n


def test_a_steady_offset_is_no_loss_and_long_gaps_in_two_blocks_are():
    # Every call 0.5 µs off the CPU (the window's clock reads): nothing lost. One call
    # preempted for 3 ms in each of two blocks of twenty 600 µs calls: the worst block
    # is left out, so 3 ms of 30 ms.
    quiet = preemption.preempted_shares([_record(0, _steady())])
    assert quiet == {0: pytest.approx(0.0)}
    hit = [*_steady(19), (3600.0, 599.5)]
    shares = preemption.preempted_shares(
        [_record(0, _steady()), _record(1, hit), _record(1, hit), _record(2, hit)]
    )
    assert shares[0] == pytest.approx(0.0)
    assert shares[1] == pytest.approx(3000.0 / (2 * (19 * 600.0 + 3600.0)))
    # One event in one block alone (a kernel thread's slice) is not a share.
    assert shares[2] == pytest.approx(0.0)


def test_waiting_by_design_and_device_blocks_are_not_judged():
    # A 200 µs sleep in every call, its wake-ups 0-40 µs late: off-CPU by design.
    rng = np.random.default_rng(0)
    sleep = [(280.0 + late, 80.0) for late in rng.uniform(0, 40, 20)]
    cuda = [*_steady(19), (9000.0, 100.0)]
    assert preemption.preempted_shares([_record(0, sleep), _record(1, cuda, "cuda")]) == {}
    # The timer floor's empty calls are half off the CPU but under a µs: judged.
    floor = [(1.2, 0.6)] * 19 + [(2001.2, 0.6)]
    assert preemption.preempted_shares([_record(2, floor)] * 2)[2] > 0.45


def test_records_without_a_cpu_column_are_skipped():
    record = _record(0, _steady())
    record["samples_us"] = [[600.0]] * 5
    assert preemption.preempted_shares([record, {"worker": 1, "samples_us": None}]) == {}


def test_the_host_reading_labels_a_preempted_worker_and_names_it():
    # Two blocks each losing 10 ms of 17.2: the worst left out, 10 ms of 34.4 ms.
    hit = [*_steady(10), *[(600.0 + 5000.0, 599.5)] * 2]
    reading = stability.assess_host(
        [*(_record(w, _steady()) for w in range(4)), _record(4, hit), _record(4, hit)]
    )
    assert reading.verdict == stability.NOISY
    assert reading.preempted["4"] > stability.PREEMPTED_LIMIT
    assert reading.preempted["0"] == pytest.approx(0.0)
    assert reading.thresholds["preempted"] == stability.PREEMPTED_LIMIT
    (reason,) = reading.reasons
    assert reason.startswith("worker 4 lost up to 29 % of the timed calls' time off the CPU")
    several = stability.assess_host(
        [*(_record(w, hit) for w in (0, 0, 1, 1, 2, 2)), _record(3, _steady())]
    )
    assert several.reasons[0].startswith("3 of 4 workers (worker 0 most) lost up to 29 %")
    quiet = stability.assess_host([_record(w, _steady()) for w in range(5)])
    assert quiet.verdict == stability.STABLE and quiet.reasons == []


@pytest.mark.e2e
def test_callables_that_sleep_by_design_are_not_called_preempted():
    # A pair whose every call sleeps (an I/O-like callable), on a seeded clock: 20 µs on
    # the CPU, then 200 or 100 µs off it. Off the CPU by design, so its blocks are not
    # judged and the run is not labelled for it.
    from embedbench.runner import paired_benchmark

    clock = StepClock(seed=2)
    with clock_seam.using(clock):
        result = paired_benchmark(
            {"baseline": clock.work(20, 200), "fixed": clock.work(20, 100)},
            warmup=2,
            blocks=6,
            iterations=5,
            allow_busy=True,
        )
    reading = result.host_stability
    assert not any("off the CPU" in reason for reason in reading.reasons), reading.reasons
    # Only the timer floor's empty calls were judged: one worker, well under the limit.
    assert set(reading.preempted) == {"0"}
    assert reading.preempted["0"] < stability.PREEMPTED_LIMIT
    # The pair's own blocks, read alone: every one waits by design, none is judged.
    assert preemption.preempted_shares([r.to_json() for r in result.records]) == {}
