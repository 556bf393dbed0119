"""The I/O guard: /proc/meminfo and /proc/stat parsing, the wait, the refusal, the label;
and the synthetic checkpoint writer's fsync."""

import ast
import json
import os
from pathlib import Path

import pytest

from embedbench.errors import ContentionError, EmbedbenchError, IoBusyError
from embedbench.harness import ioguard
from embedbench.harness.ioguard import (
    DIRTY_THRESHOLD_BYTES,
    IOWAIT_THRESHOLD,
    read_iowait_jiffies,
    read_writeback_bytes,
    wait_for_quiet_io,
)
from embedbench.omni import checkpoint as ck
from embedbench.omni import synthetic

MiB = 2**20


@pytest.fixture(autouse=True)
def _default_windows(monkeypatch):
    """These tests check the default window against fake sleeps: no short test window."""
    monkeypatch.delenv(ioguard.WINDOW_ENV, raising=False)


def _meminfo_text(dirty: int, writeback: int) -> str:
    return (
        "MemTotal:       131072000 kB\n"
        "MemFree:         1000000 kB\n"
        f"Dirty:          {dirty // 1024:>8} kB\n"
        f"Writeback:      {writeback // 1024:>8} kB\n"
        "WritebackTmp:          7 kB\n"  # must not be taken for Writeback
        "HugePages_Total:       0\n"
    )


def _stat_text(iowait: int, total: int) -> str:
    # idle takes what iowait leaves; the guest columns (already inside user) must not count.
    idle = total - iowait
    return f"cpu  0 0 0 {idle} {iowait} 0 0 0 99 99\ncpu0 0 0 0 {idle} {iowait} 0 0 0 99 99\n"


class FakeHost:
    """/proc/meminfo and /proc/stat files that follow a script, with a fake clock.

    ``states`` is a list of (pending bytes, iowait share) that the host passes through,
    one per poll; the last one stays. Every sleep advances the clock; the stat counters
    advance by 100 jiffies per sleep at the current iowait share.
    """

    def __init__(self, tmp_path: Path, states: list[tuple[int, float]]):
        self.meminfo = tmp_path / "meminfo"
        self.stat = tmp_path / "stat"
        self.states = states
        self.index = 0
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.flushes = 0
        self.iowait = 0
        self.total = 0
        self.messages: list[str] = []
        self._write()

    @property
    def state(self) -> tuple[int, float]:
        return self.states[min(self.index, len(self.states) - 1)]

    def _write(self) -> None:
        pending, _share = self.state
        self.meminfo.write_text(_meminfo_text(pending - pending // 4, pending // 4))
        self.stat.write_text(_stat_text(self.iowait, self.total))

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        _pending, share = self.state
        self.total += 100
        self.iowait += round(100 * share)
        if seconds != ioguard.IOWAIT_WINDOW_S:  # a poll: the host moves on
            self.index += 1
        self._write()

    def clock(self) -> float:
        return self.now

    def flush(self) -> None:
        """``sync``: the kernel writes back, the host moves to its next state."""
        self.flushes += 1
        self.index += 1
        self._write()

    def wait(self, **kwargs):
        return wait_for_quiet_io(
            log=self.messages.append,
            meminfo=self.meminfo,
            proc_stat=self.stat,
            sleep=self.sleep,
            clock=self.clock,
            flush=self.flush,
            **kwargs,
        )


def test_parses_dirty_and_writeback_in_bytes(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text(_meminfo_text(3 * MiB, 1 * MiB))
    assert read_writeback_bytes(path) == (3 * MiB, 1 * MiB)
    dirty, writeback = read_writeback_bytes()  # the real file
    assert dirty >= 0 and writeback >= 0
    path.write_text("MemTotal: 1 kB\nDirty: 5 kB\n")
    with pytest.raises(ValueError, match="Writeback"):
        read_writeback_bytes(path)


def test_parses_iowait_from_the_aggregate_cpu_line(tmp_path):
    path = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text("cpu  1 2 3 400 50 6 7 8 1000 1000\ncpu0 9 9 9 9 9000 9 9 9 9 9\nintr 1\n")
    assert read_iowait_jiffies(path) == (50, 1 + 2 + 3 + 400 + 50 + 6 + 7 + 8)
    path.write_text("cpu  1 2 3 4\n")
    with pytest.raises(ValueError, match="iowait"):
        read_iowait_jiffies(path)
    path.write_text("cpu0 1 2 3 4 5\n")
    with pytest.raises(ValueError, match="aggregate"):
        read_iowait_jiffies(path)
    iowait, total = read_iowait_jiffies()  # the real file
    assert 0 <= iowait <= total


def test_quiet_io_passes_without_waiting(tmp_path):
    host = FakeHost(tmp_path, [(4 * MiB, 0.01)])
    reading = host.wait()
    assert reading.busy is False and reading.allowed and reading.label is None
    assert reading.waited_s == 0.0
    assert host.messages == []
    assert host.sleeps == [ioguard.IOWAIT_WINDOW_S]  # the iowait window only, no poll
    assert reading.pending_bytes == 4 * MiB
    assert reading.iowait_share == pytest.approx(0.01)
    assert reading.source == f"{host.meminfo}, {host.stat}" and reading.reason is None


def test_busy_writeback_that_drains_is_waited_for_with_one_line(tmp_path):
    gib = 2**30
    host = FakeHost(tmp_path, [(gib, 0.0), (gib // 2, 0.0), (100 * MiB, 0.0), (2 * MiB, 0.0)])
    reading = host.wait()
    assert reading.busy is False and reading.allowed and reading.label is None
    assert reading.waited_s > 0
    # the first window, a sync and its window, then two polls of (poll, window)
    window, poll = ioguard.IOWAIT_WINDOW_S, ioguard.IO_POLL_S
    assert reading.waited_s == pytest.approx(2 * window + 2 * (poll + window))
    assert host.flushes == 1  # dirty pages are written back now, not after 30 s
    assert len(host.messages) == 1
    line = host.messages[0]
    assert "\n" not in line
    assert line.startswith("waiting up to 60 s") and line.endswith(
        "writing dirty pages back now (sync) ..."
    )
    assert "1.00 GiB of dirty pages" in line and "Dirty+Writeback in /proc/meminfo" in line
    assert "threshold 64 MiB" in line


def test_writeback_that_stays_busy_is_refused_in_one_line(tmp_path):
    host = FakeHost(tmp_path, [(1100 * MiB, 0.0)])
    with pytest.raises(IoBusyError) as info:
        host.wait(max_wait_s=10, poll_s=2)
    message = str(info.value)
    assert isinstance(info.value, ContentionError) and isinstance(info.value, EmbedbenchError)
    assert "\n" not in message
    assert "1.07 GiB of dirty pages" in message  # the amount
    assert "after waiting 10 s" in message  # how long
    assert "`sync`" in message and "stop the process" in message and "--allow-busy" in message
    assert len(host.messages) == 1
    reading = info.value.reading
    assert reading.busy and not reading.allowed and reading.waited_s >= 10
    assert host.now - 1000.0 < 10 + 2 + 1  # did not poll past the limit


def test_allow_busy_labels_instead_of_refusing_or_waiting(tmp_path):
    host = FakeHost(tmp_path, [(512 * MiB, 0.5)])
    reading = host.wait(allow_busy=True)
    assert reading.busy and reading.allowed and reading.allow_busy
    assert reading.waited_s == 0.0 and host.messages == []
    assert reading.label.startswith("busy I/O: 512 MiB of dirty pages")
    assert "iowait at 50 %" in reading.label and "--allow-busy" in reading.label
    row = reading.to_json()
    json.dumps(row)
    assert row["label"] == reading.label and row["pending_bytes"] == 512 * MiB
    assert row["dirty_threshold_bytes"] == DIRTY_THRESHOLD_BYTES
    assert row["iowait_threshold"] == IOWAIT_THRESHOLD


def test_iowait_above_threshold_counts_as_busy(tmp_path):
    host = FakeHost(tmp_path, [(0, 0.35)])
    with pytest.raises(IoBusyError) as info:
        host.wait(max_wait_s=0)
    message = str(info.value)
    assert "iowait at 35 % (/proc/stat; threshold 20 %)" in message
    assert "dirty pages" not in message
    assert info.value.reading.iowait_share == pytest.approx(0.35)


def test_unreadable_proc_files_say_so_and_allow_the_run(tmp_path):
    reading = wait_for_quiet_io(
        meminfo=tmp_path / "no-meminfo",
        proc_stat=tmp_path / "no-stat",
        sleep=lambda s: pytest.fail("nothing to wait for"),
        log=lambda m: pytest.fail("nothing to log"),
    )
    assert reading.source == "unavailable" and reading.allowed
    assert reading.busy is None and reading.label is None
    assert reading.dirty_bytes is None and reading.iowait_share is None
    assert "cannot read" in reading.reason and "no-meminfo" in reading.reason
    assert "no-stat" in reading.reason

    # Half readable: what was read is used, the rest is named; busy stays unknown.
    host = FakeHost(tmp_path, [(MiB, 0.0)])
    host.meminfo.unlink()
    half = host.wait()
    assert half.source == str(host.stat) and half.busy is None and half.allowed
    assert half.iowait_share == 0.0 and "meminfo" in half.reason


def test_no_ticks_in_the_window_is_not_made_up(tmp_path):
    host = FakeHost(tmp_path, [(MiB, 0.0)])
    reading = wait_for_quiet_io(
        meminfo=host.meminfo,
        proc_stat=host.stat,
        sleep=lambda s: None,  # stat stands still
    )
    assert reading.iowait_share is None and "no clock ticks" in reading.reason
    assert reading.busy is None and reading.allowed


def test_bad_parameters_are_refused():
    with pytest.raises(EmbedbenchError):
        wait_for_quiet_io(iowait_threshold=0.0)
    with pytest.raises(EmbedbenchError):
        wait_for_quiet_io(poll_s=0)
    with pytest.raises(EmbedbenchError):
        wait_for_quiet_io(max_wait_s=-1)


def test_module_does_not_import_torch():
    tree = ast.parse(Path(ioguard.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(name and name.split(".")[0] == "torch" for name in names)


def test_synthetic_checkpoint_fsyncs_files_and_directory_before_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def rename(src, dst):
        events.append(("rename", str(dst)))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    target = synthetic.write_synthetic_checkpoint(tmp_path / "c", hidden_size=8).resolve()
    tmp_path = tmp_path.resolve()

    renamed = events.index(("rename", str(target)))
    before = [path for kind, path in events[:renamed] if kind == "fsync"]
    build_dir = Path(before[-1])
    assert build_dir.parent == tmp_path and build_dir.name.startswith(".c.tmp-")
    synced = {Path(p).name for p in before if Path(p).parent == build_dir}
    assert synced == set(os.listdir(target))  # every shard, the index and config.json
    assert {ck.INDEX_NAME, ck.CONFIG_NAME, "model-00002-of-00002.safetensors"} <= synced
    assert ("fsync", str(tmp_path)) in events[renamed:]  # the rename itself


def test_metadata_schema_takes_an_io_guard_reading_and_old_results_without_one(tmp_path):
    from embedbench.report.schema import SCHEMA_VERSION, first_problem

    metadata = {
        "schema_version": SCHEMA_VERSION,
        "status": "complete",
        "warmup": 1,
        "blocks": 6,
        "iterations": 3,
        "lengths": [300],
        "cpu_core": 0,
        "metric_order": ["a", "b", "c"],
        "target": "reference",
        "device": "cpu",
    }
    assert first_problem("metadata.json", metadata, "embedbench") is None  # written before
    host = FakeHost(tmp_path, [(MiB, 0.0)])
    for value in (host.wait().to_json(), None):
        assert first_problem("metadata.json", {**metadata, "io_guard": value}, "embedbench") is None
    problem = first_problem("metadata.json", {**metadata, "io_guard": "quiet"}, "embedbench")
    assert problem is not None and problem.startswith("metadata.json.io_guard")


def test_the_window_variable_sets_the_iowait_window_and_the_reading_records_it(
    tmp_path, monkeypatch
):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(_meminfo_text(0, 0))
    slept: list[float] = []
    reading = ioguard.read_io(meminfo=meminfo, sleep=slept.append)
    assert slept == [ioguard.IOWAIT_WINDOW_S] and reading.iowait_window_s == 0.25
    monkeypatch.setenv(ioguard.WINDOW_ENV, "0.05")
    reading = ioguard.read_io(meminfo=meminfo, sleep=slept.append)
    assert slept[-1] == 0.05 and reading.to_json()["iowait_window_s"] == 0.05
    wait_for_quiet_io(meminfo=meminfo, sleep=slept.append, log=lambda _m: None)
    assert slept[-1] == 0.05
