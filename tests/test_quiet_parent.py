"""The parent stays quiet while a worker times: it writes no result file during a timed
block, runs off the measuring core, gathers its host facts before any worker starts; a
worker whose stdin ends before an acknowledgement stops instead of measuring on."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from embedbench import RunConfig, run
from embedbench import runner as runner_module
from embedbench.harness import devices
from embedbench.harness.interrupts import RunInterrupted
from embedbench.harness.parentcore import pinned_away
from embedbench.measure import ACK, Share
from embedbench.omni import checkpoint
from embedbench.report import results as results_module
from embedbench.report.results import RunResult
from embedbench.worker import wait_for_ack

# Each result-file write of the parent is made this slow (a slow disk): a write that ran
# while a worker timed would then overlap at least one timed block.
WRITE_DELAY_S = 0.1
CASES = ("text", "audio")


def _design(out: Path, model: Path, **changes: object) -> RunConfig:
    fields: dict[str, object] = {
        "model": str(model),
        "lengths": 300,
        "cases": CASES,
        "warmup": 2,
        "blocks": 4,
        "iterations": 3,
        "processes": 2,
        "output_dir": str(out),
        "allow_busy": True,
    }
    return RunConfig(**{**fields, **changes})


@dataclass
class Observed:
    """What the parent did during one run."""

    # (start, end, file name, this thread's cores) of every result-file write
    writes: list[tuple[float, float, str, set[int]]] = field(default_factory=list)
    event_affinity: list[tuple[str, set[int]]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    before: set[int] = field(default_factory=set)
    after: set[int] = field(default_factory=set)
    result: RunResult | None = None


def _observe(monkeypatch: pytest.MonkeyPatch, seen: Observed) -> None:
    """Log the parent's result-file writes (made slow), the affinity at each write and
    event, and the order of host facts and worker starts."""
    real_write = results_module.write_json_atomic
    real_handle = runner_module._Collector.handle
    real_describe, real_fingerprint = devices.describe, checkpoint.fingerprint
    real_popen = subprocess.Popen

    def slow_write(path, data):
        start, cores = time.time(), os.sched_getaffinity(0)
        time.sleep(WRITE_DELAY_S)
        real_write(path, data)
        seen.writes.append((start, time.time(), Path(path).name, cores))

    def handle(self, event):
        seen.event_affinity.append((event["event"], os.sched_getaffinity(0)))
        return real_handle(self, event)

    def describe(device):
        seen.calls.append("describe")
        return real_describe(device)

    def fingerprint(*args, **kwargs):
        seen.calls.append("fingerprint")
        return real_fingerprint(*args, **kwargs)

    def popen(args, *rest, **kwargs):
        if "embedbench.worker" in list(args):
            seen.calls.append("worker")
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(results_module, "write_json_atomic", slow_write)
    monkeypatch.setattr(runner_module._Collector, "handle", handle)
    monkeypatch.setattr(devices, "describe", describe)
    monkeypatch.setattr(checkpoint, "fingerprint", fingerprint)
    monkeypatch.setattr(subprocess, "Popen", popen)


@pytest.fixture(scope="module")
def quiet_run(small_checkpoint, tmp_path_factory) -> Observed:
    """One real run of two workers, two cases, with the parent observed."""
    seen = Observed()
    config = _design(tmp_path_factory.mktemp("quiet") / "out", small_checkpoint)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _observe(monkeypatch, seen)
        seen.before = os.sched_getaffinity(0)
        seen.result = run(config, progress=False, log=lambda _m: None)
        seen.after = os.sched_getaffinity(0)
    return seen


def _blocks(result: RunResult) -> list[dict]:
    return [*result.records, *result.aa_records]


def test_no_result_file_is_written_while_a_worker_times(quiet_run):
    result = quiet_run.result
    blocks = _blocks(result)
    floors = [r for r in blocks if r["case"] == "timer"]
    timed = [r for r in blocks if r["scope"] == "whole_wrapper"]
    assert {r["worker"] for r in floors} == {r["worker"] for r in timed} == {0, 1}
    assert {r["case"] for r in timed} == set(CASES)
    # The writes watched span the measuring: some fell between the workers' first and
    # last blocks (the records and rows of each case as it finished).
    first, last = min(r["wall_start"] for r in blocks), max(r["wall_end"] for r in blocks)
    names = {name for start, _, name, _ in quiet_run.writes if first < start < last}
    assert {"metadata.json", "micro-raw.json", "validation.json"} <= names
    overlaps = [
        (name, record["worker"], record["case"], record["variant"], record["block"])
        for start, end, name, _ in quiet_run.writes
        for record in blocks
        if start < record["wall_end"] and record["wall_start"] < end
    ]
    assert overlaps == []


def test_the_parent_only_reads_the_pipe_while_a_worker_measures(quiet_run):
    # From each worker's acknowledged ready to its done, outside the acknowledgement
    # waits: no byte written, nothing read but the worker's events, little CPU.
    workers = quiet_run.result.metadata["workers"]
    assert [w["worker"] for w in workers] == [0, 1]
    for worker in workers:
        parent = worker["parent_while_measuring"]
        assert parent["measuring_s"] > 0
        assert parent["pipe_bytes"] > 0  # the progress events arrived while it measured
        assert parent["written_bytes"] == 0
        assert parent["other_read_bytes"] == 0
        assert parent["read_bytes"] == parent["pipe_bytes"]
        assert 0 <= parent["cpu_s"] < parent["measuring_s"]


def test_the_parent_runs_off_the_measuring_core_and_comes_back(quiet_run):
    allowed = sorted(quiet_run.before)
    if len(allowed) < 2:
        pytest.skip("needs two allowed cores: one to measure on, one for the parent")
    meta = quiet_run.result.metadata
    core = meta["cpu_core"]
    others = set(allowed) - {core}
    assert core == allowed[0]  # the default measuring core: the lowest allowed one
    assert all(w["isolation"]["cpu_core"] == core for w in meta["workers"])
    kinds = {kind for kind, _ in quiet_run.event_affinity}
    assert {"ready", "validation", "records", "progress"} <= kinds
    assert [cores for _, cores in quiet_run.event_affinity if cores != others] == []
    # Every write up to the last block ran off the core; the last one (the final status,
    # once the workers are done) back on the cores the parent had.
    last = max(r["wall_end"] for r in _blocks(quiet_run.result))
    during = [cores for start, _, _, cores in quiet_run.writes if start < last]
    assert len(during) > 5 and all(cores == others for cores in during)
    assert quiet_run.writes[-1][3] == quiet_run.before
    assert meta["parent_affinity"] == sorted(others)
    assert meta["parent_affinity_reason"] is None
    assert meta["provenance"]["cpu"]["affinity"] == allowed  # read before moving
    assert quiet_run.after == quiet_run.before


def test_host_facts_are_gathered_before_the_first_worker_starts(quiet_run):
    calls = quiet_run.calls
    assert calls.count("worker") == 2
    first_worker = calls.index("worker")
    assert {"describe", "fingerprint"} <= set(calls[:first_worker])
    assert [c for c in calls[first_worker:] if c != "worker"] == []
    meta = quiet_run.result.metadata
    assert meta["device_name"] and meta["provenance"]["checkpoint"]["fingerprint"]


def test_an_interrupted_run_gives_the_parent_its_cores_back(
    small_checkpoint, tmp_path, monkeypatch
):
    real_handle = runner_module._Collector.handle

    def interrupt_at_the_first_case(self, event):
        real_handle(self, event)
        if event["event"] == "validation":
            raise KeyboardInterrupt

    monkeypatch.setattr(runner_module._Collector, "handle", interrupt_at_the_first_case)
    before = os.sched_getaffinity(0)
    out = tmp_path / "out"
    with pytest.raises(RunInterrupted):
        run(_design(out, small_checkpoint), progress=False, log=lambda _m: None)
    assert os.sched_getaffinity(0) == before
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["workers"][0]["exit_code"] is not None
    if len(before) > 1:
        assert meta["cpu_core"] not in meta["parent_affinity"]


def test_one_process_measures_in_the_parent_on_its_core(small_checkpoint, tmp_path):
    before = os.sched_getaffinity(0)
    config = _design(tmp_path / "out", small_checkpoint, processes=1, blocks=2, cases=("text",))
    meta = run(config, progress=False, log=lambda _m: None).metadata
    assert meta["parent_affinity"] == [meta["cpu_core"]]
    assert "one process" in meta["parent_affinity_reason"]
    assert os.sched_getaffinity(0) == before


def test_a_worker_stops_when_its_stdin_ends_before_an_ack(small_checkpoint):
    # A share that takes minutes to time: a worker that went on without its parent's
    # acknowledgement would run into the timeout.
    config = _design(Path("unused"), small_checkpoint, iterations=200_000)
    share = Share(
        config=config,
        worker=0,
        first_block=0,
        block_count=2,
        cpu_core=0,
        device="cpu",
        model_dir=str(small_checkpoint),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "embedbench.worker"],
        input=json.dumps(share.to_json()) + "\n",  # then EOF: no acknowledgement ever
        capture_output=True,
        text=True,
        timeout=120,
        env=runner_module.worker_environment(),
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 130, proc.stderr
    kinds = [e["event"] for e in events]
    assert kinds[0] == "host_probe"  # the quiet-host probe comes first and needs no ack
    assert [k for k in kinds if k not in ("host_probe", "host_wait")] == ["ready", "stopped"]
    assert "stdin" in events[-1]["reason"]


# -- the pieces, without a run -------------------------------------------------------------

SHOW_CORES = "import os; print(sorted(os.sched_getaffinity(0)))"


def _two_cores() -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two allowed cores: one to measure on, one for the parent")
    return allowed


@pytest.mark.unit
def test_pinning_moves_every_thread_off_the_core_and_back():
    allowed = _two_cores()
    before = os.sched_getaffinity(0)
    release, started = threading.Event(), threading.Event()
    native: list[int] = []

    def idle() -> None:
        native.append(threading.get_native_id())
        started.set()
        release.wait(10)

    thread = threading.Thread(target=idle)  # a thread that was there before pinning
    thread.start()
    started.wait(10)
    try:
        with pinned_away(allowed[0], allowed) as parent:
            assert parent.cores == allowed[1:] and parent.reason is None
            assert os.sched_getaffinity(0) == set(allowed[1:])
            assert os.sched_getaffinity(native[0]) == set(allowed[1:])
        assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(native[0]) == before
    finally:
        release.set()
        thread.join()


@pytest.mark.unit
def test_pinning_is_undone_on_ctrl_c_and_on_error():
    allowed = _two_cores()
    before = os.sched_getaffinity(0)
    for failure in (KeyboardInterrupt, OSError):
        with pytest.raises(failure), pinned_away(allowed[0], allowed):
            assert allowed[0] not in os.sched_getaffinity(0)
            raise failure
        assert os.sched_getaffinity(0) == before


@pytest.mark.unit
def test_with_one_allowed_core_the_parent_stays_and_says_why():
    before = os.sched_getaffinity(0)
    core = min(before)
    with pinned_away(core, [core]) as parent:
        assert os.sched_getaffinity(0) == before  # nowhere to go: nothing moved
        assert parent.cores == sorted(before)
        assert f"only cpu core {core} is allowed" in parent.reason
        with parent.spawning():
            assert os.sched_getaffinity(0) == before
    assert os.sched_getaffinity(0) == before


@pytest.mark.unit
def test_a_child_started_while_pinned_gets_the_original_cores():
    allowed = _two_cores()
    with pinned_away(allowed[0], allowed) as parent:
        with parent.spawning():
            child = subprocess.run(
                [sys.executable, "-c", SHOW_CORES], capture_output=True, text=True, check=True
            )
        assert os.sched_getaffinity(0) == set(allowed[1:])
    assert json.loads(child.stdout) == allowed


@pytest.mark.unit
def test_the_worker_waits_for_one_ack_and_stops_at_the_end_of_stdin():
    stdin = io.StringIO(f"{ACK}\n")
    wait_for_ack(stdin)
    assert stdin.read() == ""  # exactly one line taken
    with pytest.raises(RunInterrupted, match="stdin ended"):
        wait_for_ack(stdin)
    with pytest.raises(RuntimeError, match="expected 'ack'"):
        wait_for_ack(io.StringIO("go on\n"))
