"""paired_benchmark with a factory: the callables of an importable function, timed in
fresh worker processes with run's design and between-process interval.

Real workers on the real host are checked for what they run and record; what the
interval concludes is checked on the simulated host (here, an A/A pair; a planted
difference over simulated workers: tests/test_sim.py)."""

import os
import signal
import subprocess

import pytest

from embedbench import ConfigError, paired_benchmark
from embedbench import runner as runner_module
from embedbench.harness import stats
from embedbench.harness.interrupts import RunInterrupted
from embedbench.sim import SimulatedHost, simulate_pair

FACTORIES = "support.paired_factories"
QUICK = {"warmup": 3, "iterations": 5, "allow_busy": True}
TIMER_BLOCKS = 10  # the timer floor's blocks in every worker


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every worker the runner starts (each is started for real)."""
    seen: list[list[str]] = []
    real_popen = subprocess.Popen

    def popen(args, *rest, **kwargs):
        seen.append(list(args))
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return seen


@pytest.fixture
def no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the runner starts any worker."""

    def popen(*_args, **_kwargs):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(subprocess, "Popen", popen)


def test_a_factory_over_three_real_workers_keeps_the_runs_structure(started):
    # Real worker processes and real timing: what was run and recorded, never the numbers.
    result = paired_benchmark(f"{FACTORIES}:spins", blocks=6, processes=3, **QUICK)
    assert len(started) == 3
    assert all(args[1:] == ["-m", "embedbench.worker"] for args in started)
    pair = result.summary
    assert pair.workers == 3 and pair.blocks == 6 and result.processes_source == "given"
    assert pair.interval.method == stats.BETWEEN_PROCESSES and pair.interval.units == 3
    low, high = result.reduction_ci95_pct
    assert low <= result.reduction_pct <= high
    assert result.verdict in ("faster", "slower", "no detectable difference")
    # Two blocks per worker, numbered as a run numbers them, in case "paired" at 0 tokens.
    assert len(result.records) == 12
    assert sorted({r.worker for r in result.records}) == [0, 1, 2]
    assert all(r.worker == r.block // 2 for r in result.records)
    assert {(r.case, r.tokens) for r in result.records} == {("paired", 0)}
    assert sorted({r.worker for r in result.timer_floor}) == [0, 1, 2]
    assert len(result.timer_floor) == 3 * TIMER_BLOCKS
    # The canary at both edges of every block and its reading, with each worker's probes.
    assert all(r.canary_us_end > 0 for r in result.records)  # one read per block edge
    host = result.host_stability
    # one read per block edge: each worker's series (timer floor, its 4 halves) starts once
    assert host.canary_reads == 3 * ((TIMER_BLOCKS + 1) + (4 + 1))
    assert host.probes == 3 * 2  # before each worker's timer floor and before its blocks
    assert [w.worker for w in host.workers] == [0, 1, 2]


def test_an_aa_factory_with_the_default_processes_fitted_to_the_blocks(no_worker, capsys):
    # On the simulated host (embedbench.sim): one callable under both labels, spread over
    # simulated workers, so the answer is the same on every machine.
    result = simulate_pair("helpers:simulated_aa_pair", SimulatedHost(), seed=4, **QUICK, blocks=6)
    lines = [line for line in capsys.readouterr().err.splitlines() if "paired_benchmark:" in line]
    assert lines == [
        "paired_benchmark: 3 worker processes, not 5: blocks=6 allows at most 3, one block in "
        "each order per worker; blocks=10 or more runs 5"
    ]
    assert result.summary.workers == 3 and result.processes_source == "derived"
    assert result.summary.interval.method == stats.BETWEEN_PROCESSES
    assert {r.worker for r in result.records} == {0, 1, 2}
    # The same code under both labels: no direction called, the interval holds 0 (this
    # seed's answer: a 95 % interval misses 0 one time in 20), the estimate near it.
    assert result.verdict == "no detectable difference"
    low, high = result.reduction_ci95_pct
    assert low <= 0.0 <= high and low <= result.reduction_pct <= high
    assert abs(result.reduction_pct) < 2.0 and abs(result.pr_reduction_pct) < 2.0


def test_ctrl_c_stops_the_worker_and_starts_no_other(started, monkeypatch):
    real_handle = runner_module._PairedCollector.handle

    def interrupt_when_ready(self, event):
        real_handle(self, event)
        if event["event"] == "ready":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(runner_module._PairedCollector, "handle", interrupt_when_ready)
    cores = os.sched_getaffinity(0)
    with pytest.raises(RunInterrupted):
        paired_benchmark(f"{FACTORIES}:spins", blocks=6, processes=3, **QUICK)
    assert len(started) == 1
    assert os.sched_getaffinity(0) == cores  # the parent is back on its own cores


BAD_FACTORIES = [
    (FACTORIES, 'must be "package.module:function"'),
    (f"{FACTORIES}:", 'must be "package.module:function"'),
    (":spins", 'must be "package.module:function"'),
    (f"{FACTORIES}:spins:more", 'must be "package.module:function"'),
    ("support/paired_factories.py:spins", 'must be "package.module:function"'),
    ("__main__:spins", "move the function into a module"),
    ("support.no_such_module:spins", "cannot import the factory's module"),
    (f"{FACTORIES}:missing", "has no function 'missing'"),
    (f"{FACTORIES}:NOT_A_FUNCTION", "has no function 'NOT_A_FUNCTION'"),
    (f"{FACTORIES}:wrong_keys", "got a dict with keys ['baseline', 'candidate']"),
    (f"{FACTORIES}:extra_key", "got a dict with keys ['baseline', 'fixed', 'other']"),
    (f"{FACTORIES}:not_a_dict", "got list"),
    (f"{FACTORIES}:not_callable", "returned int for 'fixed'"),
    (f"{FACTORIES}:raises", "RuntimeError: no such device"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("spec", "says"), BAD_FACTORIES)
def test_a_bad_factory_is_refused_in_one_line_before_any_worker(spec, says, no_worker):
    with pytest.raises(ConfigError) as info:
        paired_benchmark(spec, blocks=6, processes=3, **QUICK)
    message = str(info.value)
    assert says in message and "\n" not in message


@pytest.mark.unit
def test_a_bad_factory_with_derived_processes_prints_only_its_refusal(no_worker, capsys):
    with pytest.raises(ConfigError, match="has no function 'missing'"):
        paired_benchmark(f"{FACTORIES}:missing", blocks=4, **QUICK)
    assert "paired_benchmark:" not in capsys.readouterr().err  # the design line comes after


@pytest.mark.unit
def test_processes_the_blocks_cannot_hold_are_refused_with_runs_message(no_worker):
    with pytest.raises(ConfigError, match=r"processes \(5\) must be at most blocks / 2 \(3\)"):
        paired_benchmark(f"{FACTORIES}:spins", blocks=6, processes=5, **QUICK)


@pytest.mark.unit
def test_callables_in_a_dict_stay_in_one_process(no_worker):
    def call() -> None:
        pass

    with pytest.raises(ConfigError, match="needs a factory"):
        paired_benchmark({"baseline": call, "fixed": call}, blocks=6, processes=3, **QUICK)
