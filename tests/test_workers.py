"""Worker processes: what each one records, how the run treats a failing or stopped one,
and that workers which measured different code are never mixed."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import StepClock

from embedbench import load_results
from embedbench.config import RunConfig
from embedbench.errors import ConfigError
from embedbench.harness.interrupts import StopFlag
from embedbench.measure import Share
from embedbench.omni.scenarios import CASES
from embedbench.report.schema import SCHEMA_VERSION
from embedbench.runhost import RealHost
from embedbench.runner import WorkerError, _Collector, prepare
from embedbench.spawn import run_worker as _run_worker


def test_every_record_and_worker_is_described(small_run_dir):
    result = load_results(small_run_dir)
    meta = result.metadata
    assert meta["processes"] == 3 and meta["schema_version"] == SCHEMA_VERSION
    workers = meta["workers"]
    assert [w["worker"] for w in workers] == [0, 1, 2]
    assert [w["blocks"] for w in workers] == [[0, 2], [2, 4], [4, 6]]
    assert len({w["pid"] for w in workers}) == 3 and os.getpid() not in {w["pid"] for w in workers}
    for w in workers:
        assert w["exit_code"] == 0 and w["started_at"] <= w["ended_at"]
        assert w["code"] == meta["code_sha256"]  # every worker ran the same bytecode
        assert w["table"]["address_mod_2mib"] is not None and w["table"]["load_s"] > 0
        assert w["table"]["cuda_start_s"] is None  # CPU: no CUDA context to create
    # Case orders rotated by the worker index: every case early in some worker.
    orders = [w["case_order"] for w in workers]
    assert (
        orders[0][0] == "text@300" and orders[1][0] == "audio@300" and orders[2][0] == "image@300"
    )
    assert all(sorted(o) == sorted(orders[0]) for o in orders)
    timed = [r for r in result.records if r["scope"] == "whole_wrapper"]
    for record in timed:
        assert record["worker"] == record["block"] // 2
    floors = [r for r in result.records if r["case"] == "timer"]
    assert {r["worker"] for r in floors} == {0, 1, 2}
    assert [r["case"] for r in result.summary] == list(CASES)  # the configured order
    for row in result.summary:
        assert row["workers"] == 3 and len(row["worker_reduction_pct"]) == 3
    for row in result.validation:
        assert row["workers_ok"] == {"0": True, "1": True, "2": True}
    checks = [c["before"] for c in meta["contention_checks"]]
    assert checks == ["run", "worker 1", "worker 2"]
    assert [c["before"] for c in meta["io_checks"]] == checks


def _share(config: RunConfig, model: Path, **changes) -> Share:
    fields = {
        "config": config,
        "worker": 0,
        "first_block": 0,
        "block_count": 2,
        "cpu_core": 0,
        "device": "cpu",
        "model_dir": str(model),
    }
    return Share(**{**fields, **changes})


@pytest.mark.unit
def test_the_cuda_context_is_created_before_the_load_clock_and_recorded_apart(
    small_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CUDA the context is created first (devices.start_cuda), then the table's load is
    timed alone: load_s no longer holds the context's creation (stand-ins here: no GPU)."""
    import torch

    from embedbench import measure

    assert measure.devices.start_cuda(torch.device("cpu")) is None  # the real one, off CUDA
    clock = StepClock(read_ns=100, jitter=0.0)  # the load clock, seeded: no real time counts
    monkeypatch.setattr(measure, "time", clock.time)
    order: list[str] = []

    def start(device: torch.device) -> float:
        order.append(f"start {device.type}")
        clock.spend(200_000)  # a context creation the load clock must not see
        return 0.2

    def load(location, device):
        order.append(f"load {torch.device(device).type}")
        clock.spend(50_000)  # the table's load: 50 ms
        return torch.zeros(4, 4)

    monkeypatch.setattr(measure.devices, "start_cuda", start)
    monkeypatch.setattr(measure.checkpoint, "load_embedding_table", load)
    monkeypatch.setattr(measure, "sync_for", lambda device: lambda: order.append("sync"))
    share = _share(RunConfig(allow_busy=True), small_checkpoint, device="cuda")
    _, _, placement = measure._load(share)
    assert order == ["start cuda", "load cuda", "sync"]
    assert placement["cuda_start_s"] == 0.2
    assert placement["load_s"] == pytest.approx(0.05, abs=1e-6)  # the load alone


class _Events:
    """Stands in for the runner's collector: keeps what a worker reported."""

    def __init__(self):
        self.events = []
        self.ended = []

    def handle(self, event):
        self.events.append(event)

    def worker_finished(self, worker, code, parent=None):
        self.ended.append((worker, code))
        self.parent = parent


def test_a_worker_that_crashes_fails_the_run_in_one_line(small_checkpoint):
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a torch without CUDA, where a CUDA device crashes the worker")
    config = RunConfig(model=str(small_checkpoint), blocks=2, processes=1, lengths=300)
    # A CUDA device on a CPU-only torch: the worker raises something that is not bad input.
    events = _Events()
    share = _share(config, small_checkpoint, device="cuda:0")
    logged = []
    with pytest.raises(WorkerError) as info:
        _run_worker(share, events, StopFlag(), logged.append)
    message = str(info.value)
    assert message.startswith("worker 0 failed (exit code 1): ") and "\n" not in message
    assert events.events == []  # it never got as far as ready
    assert events.ended == [(0, 1)]
    assert logged and all(line.startswith("worker 0: ") for line in logged)


def test_a_worker_that_meets_bad_input_says_so_in_its_own_line(small_checkpoint, tmp_path):
    config = RunConfig(model=str(small_checkpoint), blocks=2, processes=1, lengths=300)
    share = _share(config, tmp_path / "gone")
    with pytest.raises(WorkerError) as info:
        _run_worker(share, _Events(), StopFlag(), lambda _line: None)
    assert "checkpoint" in str(info.value) and "does not exist" in str(info.value)
    assert not str(info.value).startswith("worker 0 failed")


def test_garbage_on_a_workers_stdin_is_a_crash_event_not_a_hang():
    proc = subprocess.run(
        [sys.executable, "-m", "embedbench.worker"],
        input="not json",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    event = json.loads(proc.stdout.strip().splitlines()[-1])
    assert event["event"] == "error" and event["kind"] == "crash"
    assert event["message"].startswith("JSONDecodeError")


def test_workers_that_measured_different_code_are_not_mixed(small_checkpoint, tmp_path):
    config = RunConfig(
        model=str(small_checkpoint), blocks=4, processes=2, lengths=300, output_dir=tmp_path / "o"
    )
    prepared = prepare(config, log=lambda _m: None)
    from embedbench.harness.hostlock import HostLock
    from embedbench.harness.ioguard import read_io
    from embedbench.harness.isolation import check_contention

    guards = (check_contention(0, allow_busy=True), read_io(allow_busy=True))
    lock = HostLock(tmp_path / "lock", 1)
    collector = _Collector(
        prepared, RealHost(), lock, guards, lambda _n: None, lambda _m: None, [0]
    )
    ready = {
        "event": "ready",
        "worker": 0,
        "pid": 1,
        "blocks": [0, 2],
        "case_order": ["text@300"],
        "target": "reference",
        "target_metadata": {},
        "code": {"baseline": "a" * 64, "fixed": "b" * 64},
        "code_fresh": {"checked_modules": [], "functions_compared": 0, "seconds": 0.0},
        "frequency_source": "unavailable",
        "isolation": {},
        "table": {},
    }
    collector.handle(ready)
    same = {**ready, "worker": 1, "pid": 2, "blocks": [2, 4]}
    collector.handle(same)  # the same code: accepted
    changed = {**same, "code": {"baseline": "a" * 64, "fixed": "c" * 64}}
    with pytest.raises(WorkerError, match="measured different code than worker 0"):
        collector.handle(changed)


def test_processes_beyond_half_the_blocks_are_refused():
    with pytest.raises(ConfigError, match="pass --processes 2"):
        RunConfig(blocks=4, processes=3)


def _wait_for_workers(out: Path, proc: subprocess.Popen, count: int, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            workers = json.loads((out / "metadata.json").read_text())["workers"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            workers = []
        if len(workers) >= count:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"the run never started {count} workers")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_current_worker_and_keeps_what_finished(
    small_checkpoint, tmp_path, signum
):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "embedbench", "run", "--model", str(small_checkpoint), "--lengths", "300"),
            *("--warmup", "2", "--blocks", "6", "--processes", "3", "--iterations", "20000"),
            *("--output-dir", str(out), "--no-progress", "--allow-busy"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers = _wait_for_workers(out, proc, 1)
    proc.send_signal(signum)  # to the parent only: it passes the stop on to its worker
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    result = load_results(out)
    assert result.status == "interrupted" and result.summary == []
    assert result.metadata["workers"][0]["exit_code"] == 130  # stopped after its block
    for worker in workers:  # no worker outlives the run
        with pytest.raises(ProcessLookupError):
            os.kill(worker["pid"], 0)
