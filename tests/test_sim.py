"""The simulated host runs the kit's own pipeline in this process: the same ``RunResult``
as ``run``, bit for bit the same for the same seed, in a fraction of a second."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedbench.config import RunConfig
from embedbench.errors import ContentionError
from embedbench.harness import clock
from embedbench.sim import (
    Neighbour,
    SimulatedHost,
    Simulation,
    Work,
    simulate_pair,
    simulate_run,
    spender,
)

SMALL = RunConfig(cases=["text", "audio"], blocks=10, processes=5)


def _as_json(result) -> str:
    return json.dumps(
        [result.metadata, result.records, result.summary, result.validation], sort_keys=True
    )


def test_the_same_seed_gives_the_same_run_bit_for_bit():
    first = simulate_run(SMALL, SimulatedHost(), seed=7)
    again = simulate_run(SMALL, SimulatedHost(), seed=7)
    other = simulate_run(SMALL, SimulatedHost(), seed=8)
    assert _as_json(first) == _as_json(again)
    assert _as_json(first) != _as_json(other)


def test_a_simulated_run_has_the_shape_of_a_real_one():
    result = simulate_run(SMALL, SimulatedHost(), seed=1)
    assert result.directory is None and result.status == "complete"
    assert [row["case"] for row in result.summary] == ["text", "audio"]
    timed = [r for r in result.records if r["case"] != "timer"]
    # 10 blocks of both forms per case, spread over 5 workers, 20 calls a block half
    assert len(timed) == 2 * 10 * 2
    assert {r["worker"] for r in timed} == set(range(5))
    assert all(len(r["samples_us"]) == 20 for r in timed)
    assert [w["worker"] for w in result.metadata["workers"]] == list(range(5))
    assert result.metadata["host_stability"]["verdict"] == "stable"
    assert result.metadata["schema_check"].startswith("skipped")
    audio = result.summary_row("audio", 1172)
    low, high = audio["reduction_ci95_pct"]
    assert low <= audio["reduction_pct"] <= high
    assert audio["verdict"] == "faster"  # the forms' work differs by 44 %
    assert clock.now() is clock.REAL_CLOCK  # the simulated clock is gone after the run


def test_the_timer_floor_is_the_clock_reads_the_window_spans():
    host = SimulatedHost(perf_read_ns=50, thread_read_ns=600, call_overhead_ns=0, noise=0.0)
    result = simulate_run(RunConfig(cases=["text"], blocks=2, processes=1), host, seed=0)
    floor = [s for r in result.records if r["case"] == "timer" for s in r["samples_us"]]
    # the PR's window: two thread-clock reads and one wall read lie between the wall reads
    assert {round(host_us, 3) for host_us, _cpu, _done in floor} == {1.25}


def test_the_forms_work_sets_the_reduction():
    work = {"text": {"baseline": Work(0.0, 1000.0), "fixed": Work(0.0, 800.0)}}
    host = SimulatedHost(
        work=work, noise=0.0, fluctuation=0.0, outlier_rate=0.0, worker_form_regime=0.0
    )
    result = simulate_run(RunConfig(cases=["text"]), host, seed=3)
    row = result.summary_row("text", 1172)
    assert row["reduction_pct"] == pytest.approx(20.0, abs=0.1)


def test_bursts_off_the_cpu_show_in_wall_time_not_thread_time():
    host = SimulatedHost(burst_rate_hz=200.0, burst_us=3000.0)
    result = simulate_run(RunConfig(cases=["text"], blocks=4, processes=2), host, seed=2)
    calls = [s for r in result.records if r["case"] == "text" for s in r["samples_us"]]
    lost = [host_us - cpu for host_us, cpu, _ in calls]
    assert max(lost) >= 3000.0 * 0.99  # a whole burst inside one call
    assert sorted(lost)[len(lost) // 2] < 5.0  # most calls lost nothing


def test_a_neighbour_is_seen_by_the_other_cores_share():
    host = SimulatedHost(neighbour=Neighbour("always"))
    result = simulate_run(RunConfig(cases=["text"], blocks=4, processes=2), host, seed=4)
    busy = [r["other_cores_busy"] for r in result.records if r["case"] == "text"]
    assert min(b for b in busy if b is not None) > 0.9


def test_the_stored_reference_follows_the_simulated_clock():
    with_reference = Simulation(SimulatedHost(), seed=5)
    try:
        for _ in range(3):
            with_reference.run(SMALL)
        result = with_reference.run(SMALL)
    finally:
        with_reference.close()
    reference = result.metadata["host_stability"]["host_reference"]
    assert reference["runs"] == 3 and reference["level"] is not None


def test_the_kits_own_start_stall_and_a_slow_first_worker_leave_the_verdicts_right():
    # As found on real hosts: slow calls in each worker's first timed block, and a first
    # worker slower than the rest. Both move levels, not the forms' ratio.
    host = SimulatedHost(start_stall_calls=6, first_worker_slowdown=0.10)
    result = simulate_run(RunConfig(cases=["text", "audio"]), host, seed=11)
    first = min(
        (r for r in result.records if r["case"] != "timer" and r["worker"] == 0),
        key=lambda r: r["wall_start"],
    )
    assert sum(host_us > 20_000 for host_us, _, _ in first["samples_us"]) >= 1
    text, audio = result.summary_row("text", 1172), result.summary_row("audio", 1172)
    assert text["verdict"] == "no detectable difference"
    truth = 100 * (1 - 1100 / 1975)
    low, high = audio["reduction_ci95_pct"]
    assert audio["verdict"] == "faster" and low <= truth <= high


PAIR_DESIGN = {"warmup": 5, "blocks": 12, "iterations": 10}
SUPPORT = str(Path(__file__).resolve().parent / "support")


@pytest.fixture
def sim_factory(monkeypatch):
    monkeypatch.syspath_prepend(SUPPORT)
    return "sim_factories:planted"


def _planted_pair():
    return {
        "baseline": spender(Work(0.0, 1000.0), "baseline"),
        "fixed": spender(Work(0.0, 800.0), "fixed"),
    }


def test_paired_benchmark_in_process_runs_the_same_sequence_on_the_simulated_host():
    # One process: its interval cannot see a process's own form effects, so none here.
    host = SimulatedHost(worker_form_regime=0.0)
    result = simulate_pair(_planted_pair(), host, seed=1, **PAIR_DESIGN)
    low, high = result.reduction_ci95_pct
    assert low <= 20.0 <= high and result.verdict == "faster"
    assert len(result.records) == 2 * PAIR_DESIGN["blocks"]
    assert len(result.timer_floor) == 10
    assert result.host_stability.probes == 2  # before the timer floor and before the pair


def test_a_factory_pair_is_spread_over_simulated_workers(sim_factory):
    # No form-specific worker regime: every worker's truth is the planted 20 %.
    host = SimulatedHost(worker_form_regime=0.0)
    result = simulate_pair(sim_factory, host, seed=2, processes=3, **PAIR_DESIGN)
    assert {r.worker for r in result.records} == {0, 1, 2}
    low, high = result.reduction_ci95_pct
    assert low <= 20.0 <= high
    assert result.host_stability.probes == 6


ENTRY_POINTS = ("run, workers", "run, one process", "pair, in process", "pair, factory")


def _measure(entry: str, host: SimulatedHost, allow_busy: bool, factory: str):
    if entry.startswith("run"):
        processes = 2 if entry == "run, workers" else 1
        config = RunConfig(cases=["text"], blocks=4, processes=processes, allow_busy=allow_busy)
        return simulate_run(config, host, seed=5).metadata["host_stability"]["verdict"]
    variants = factory if entry == "pair, factory" else _planted_pair()
    processes = 2 if entry == "pair, factory" else None
    result = simulate_pair(
        variants, host, seed=5, allow_busy=allow_busy, processes=processes, **PAIR_DESIGN
    )
    return result.host_stability.verdict


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_refuses_a_busy_measuring_core(entry, sim_factory):
    # Bursts that hold two thirds of the measuring core: the contention guard's bar.
    host = SimulatedHost(burst_rate_hz=600.0, burst_us=3000.0)
    with pytest.raises(ContentionError) as refused:
        _measure(entry, host, allow_busy=False, factory=sim_factory)
    assert "\n" not in str(refused.value) and "--allow-busy" in str(refused.value)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_labels_bursts_under_the_guards_bar(entry, sim_factory):
    host = SimulatedHost(burst_rate_hz=100.0, burst_us=3000.0)
    assert _measure(entry, host, allow_busy=True, factory=sim_factory) == "noisy"
    assert _measure(entry, SimulatedHost(), allow_busy=True, factory=sim_factory) == "stable"
