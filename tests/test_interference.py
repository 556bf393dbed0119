"""Noisy neighbours on the simulated host: interference that ``/proc/stat`` lets through
must be seen, and never turn into a confident wrong verdict.

These promises were checked by injecting real neighbours (``benchmarks/neighbour.py``)
into real runs on the shared CI machine, whose outcomes then depended on that machine;
they are now checked on ``embedbench.sim``, where the neighbour's effect is known and
every run is seeded. The real-host evidence stays in ``benchmarks/interference.py``
(docs/PERFORMANCE.md).
"""

from __future__ import annotations

import pytest
from helpers import bench_module

from embedbench.config import RunConfig
from embedbench.errors import ContentionError, HostNoisyError
from embedbench.harness import stability
from embedbench.sim import Neighbour, SimulatedHost, Simulation, simulate_run

promises = bench_module("sim_promises")
SMALL = RunConfig(cases=["text", "audio"], blocks=10, processes=5, allow_busy=True)
# CPU bursts on the measuring core: 100 a second of 3 ms, about 30 % of the core, below
# the contention guard's bar (a run goes ahead), but every burst slows what it hits.
BURSTS = SimulatedHost(burst_rate_hz=100.0, burst_us=3000.0)
# A task that takes most of the measuring core, all the time (two thirds of its time).
SPINNER = SimulatedHost(burst_rate_hz=600.0, burst_us=3000.0)
BURSTS_SAY = (
    "time off the CPU",
    "canary reads disagree",
    "probes before",
)


@pytest.mark.parametrize("seed", range(10))
def test_bursts_the_core_guard_lets_through_are_labelled_noisy(seed):
    result = simulate_run(SMALL, BURSTS, seed)
    reading = result.metadata["host_stability"]
    assert result.metadata["contention"]["busy"] is False  # the guard let them through
    assert reading["verdict"] == "noisy", reading
    assert any("time off the CPU" in reason for reason in reading["reasons"]), reading
    assert all(any(s in reason for s in BURSTS_SAY) for reason in reading["reasons"]), reading


def test_a_task_sharing_the_measuring_core_shows_in_the_probes_as_time_off_the_cpu():
    quiet = simulate_run(SMALL, SimulatedHost(), seed=1).metadata["host_probes"]
    shared = simulate_run(SMALL, SPINNER, seed=1).metadata["host_probes"]
    limit = stability.PROBE_OFF_CPU_LIMIT
    assert max(p["off_cpu"] for p in quiet) < limit
    assert sorted(p["off_cpu"] for p in shared)[len(shared) // 2] > limit


def test_without_allow_busy_a_host_that_stays_noisy_is_refused_in_one_line():
    strict = RunConfig(cases=["text"], blocks=4, processes=2)
    with pytest.raises((HostNoisyError, ContentionError)) as refused:
        simulate_run(strict, SPINNER, seed=3)
    message = str(refused.value)
    assert "\n" not in message and "--allow-busy" in message
    # the core guard's bar, or the canary's probes that stayed noisy for the whole wait
    assert "the host stayed noisy" in message or " busy" in message


def test_a_toggled_memory_neighbour_never_makes_text_call_a_direction_unlabelled():
    # Text's two forms do the same work; a neighbour must not bias it into a verdict the
    # run does not label (beyond the interval's own 5 %, tested as a binomial rate).
    host = SimulatedHost(neighbour=Neighbour("toggled", period_s=1.0))
    runs = []
    for index in range(10):
        sim = Simulation(promises.QUIET, 200 + index)
        try:
            runs += [(index, sim.run(promises.config(), host)) for _ in range(10)]
        finally:
            sim.close()
    calls = promises.text_calls(runs)
    assert calls.kept, calls
