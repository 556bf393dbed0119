"""The contention guard: /proc/stat parsing and the refusal, on planted /proc/stat files,
and what a reading of the real one holds."""

import json
import os
from pathlib import Path

import pytest

from embedbench.errors import ConfigError, ContentionError, EmbedbenchError
from embedbench.harness import ioguard
from embedbench.harness.isolation import (
    CONTENTION_WINDOW_S,
    allowed_cores,
    check_contention,
    read_cpu_jiffies,
)

STAT_HEADER = "cpu  1 2 3 4 5 6 7 8 0 0\n"


def _stat_text(cores: dict[int, tuple[int, int]]) -> str:
    # user=busy, idle=idle; every other column 0 (guest columns must not count).
    lines = [STAT_HEADER]
    for core, (busy, idle) in sorted(cores.items()):
        lines.append(f"cpu{core} {busy} 0 0 {idle} 0 0 0 0 {busy} 0\n")
    return "".join(lines) + "intr 1 2 3\nctxt 5\n"


class FakeStat:
    """A /proc/stat whose counters advance by given (busy, idle) steps at each sleep."""

    def __init__(self, path: Path, steps: list[dict[int, tuple[int, int]]]):
        self.path = path
        self.steps = iter(steps)
        self.counters = {core: (1000, 1000) for core in steps[0]}
        path.write_text(_stat_text(self.counters))

    def sleep(self, _seconds: float) -> None:
        step = next(self.steps)
        self.counters = {
            core: (busy + step[core][0], idle + step[core][1])
            for core, (busy, idle) in self.counters.items()
        }
        self.path.write_text(_stat_text(self.counters))


def _core_pair() -> tuple[int, int]:
    cores = allowed_cores()
    return cores[0], cores[-1]


def test_parses_per_core_busy_and_idle_jiffies(tmp_path):
    path = tmp_path / "stat"
    path.write_text(
        "cpu  9 9 9 9 9 9 9 9 9 9\n"
        "cpu0 10 1 2 100 4 5 6 7 50 50\n"  # busy 10+1+2+5+6+7 = 31, idle 104; guest excluded
        "cpu1 1 2 3 4\n"  # an old kernel's short line
        "intr 1\n"
    )
    assert read_cpu_jiffies(path) == {0: (31, 104), 1: (6, 4)}
    assert all(len(v) == 2 for v in read_cpu_jiffies().values())


def test_minimum_of_the_windows_is_used(tmp_path):
    a, b = _core_pair()
    fake = FakeStat(tmp_path / "stat", [{a: (24, 1), b: (1, 24)}, {a: (10, 15), b: (2, 23)}])
    reading = check_contention(a, proc_stat=fake.path, sleep=fake.sleep)
    assert reading.windows == [pytest.approx(0.96), pytest.approx(0.4)]
    assert reading.busy_share == pytest.approx(0.4)
    assert reading.busy is False and reading.allowed and reading.label is None


def test_busy_core_is_refused_in_one_line_naming_core_share_and_ways_out(tmp_path):
    a, b = _core_pair()
    fake = FakeStat(tmp_path / "stat", [{a: (25, 0), b: (1, 24)}, {a: (24, 1), b: (0, 25)}])
    with pytest.raises(ContentionError) as info:
        check_contention(a, proc_stat=fake.path, sleep=fake.sleep)
    message = str(info.value)
    assert isinstance(info.value, EmbedbenchError)
    assert "\n" not in message
    assert f"cpu core {a} is 96 % busy" in message
    assert (
        "--cpu-core" in message and "--allow-busy" in message and "stop the other load" in message
    )
    if a != b:
        assert f"core {b} is 0 % busy" in message
    assert info.value.reading.busy_share == pytest.approx(0.96)


def test_allow_busy_returns_a_labelled_reading(tmp_path):
    a, b = _core_pair()
    fake = FakeStat(tmp_path / "stat", [{a: (25, 0), b: (0, 25)}, {a: (25, 0), b: (0, 25)}])
    reading = check_contention(a, allow_busy=True, proc_stat=fake.path, sleep=fake.sleep)
    assert reading.busy and reading.allowed and reading.allow_busy
    assert "allow-busy" in reading.label
    row = reading.to_json()
    json.dumps(row)
    assert row["busy_share"] == 1.0 and row["label"] == reading.label


def test_unreadable_proc_stat_says_so_instead_of_inventing_a_number(tmp_path):
    reading = check_contention(0, proc_stat=tmp_path / "missing", sleep=lambda s: None)
    assert reading.source == "unavailable" and reading.busy_share is None
    assert reading.busy is None and reading.allowed
    assert "cannot read" in reading.reason
    fake = FakeStat(tmp_path / "stat", [{0: (0, 0)}, {0: (0, 0)}])
    no_ticks = check_contention(0, proc_stat=fake.path, sleep=fake.sleep)
    assert no_ticks.busy_share is None and "no clock ticks" in no_ticks.reason
    absent = check_contention(4096, proc_stat=fake.path, sleep=fake.sleep)
    assert absent.source == "unavailable" and "not listed" in absent.reason


def test_suggested_cores_come_from_the_candidates(tmp_path):
    steps = [{0: (25, 0), 1: (0, 25), 2: (5, 20)}, {0: (25, 0), 1: (1, 24), 2: (5, 20)}]
    fake = FakeStat(tmp_path / "stat", steps)
    with pytest.raises(ContentionError, match="core 2 is 20 % busy") as info:
        check_contention(0, candidates=[0, 2], proc_stat=fake.path, sleep=fake.sleep)
    assert set(info.value.reading.other_cores) == {2}


def test_bad_parameters_are_refused():
    with pytest.raises(EmbedbenchError):
        check_contention(0, threshold=0.0)
    with pytest.raises(EmbedbenchError):
        check_contention(0, windows=0)


def test_the_window_is_the_default_or_the_variable_and_is_recorded(tmp_path, monkeypatch):
    a, b = _core_pair()
    idle = {a: (0, 25), b: (0, 25)}

    def check(**kwargs):
        fake = FakeStat(tmp_path / "stat", [idle, idle])
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            fake.sleep(seconds)

        reading = check_contention(a, proc_stat=fake.path, sleep=sleep, **kwargs)
        return slept, reading.to_json()["window_s"]

    monkeypatch.delenv(ioguard.WINDOW_ENV, raising=False)
    assert CONTENTION_WINDOW_S == 0.25  # what users get: unchanged
    assert check() == ([0.25, 0.25], 0.25)
    monkeypatch.setenv(ioguard.WINDOW_ENV, " 0.03 ")
    assert check() == ([0.03, 0.03], 0.03)
    assert check(window_s=0.5) == ([0.5, 0.5], 0.5)  # an explicit window wins
    monkeypatch.setenv(ioguard.WINDOW_ENV, "")
    assert check() == ([0.25, 0.25], 0.25)  # empty means unset
    for bad in ("0", "-1", "fast", "nan", "inf"):
        monkeypatch.setenv(ioguard.WINDOW_ENV, bad)
        with pytest.raises(ConfigError, match="EMBEDBENCH_CONTENTION_WINDOW_S must be"):
            check()


def test_the_test_session_uses_short_windows():
    assert float(os.environ[ioguard.WINDOW_ENV]) < 0.1  # tests/conftest.py


def test_an_idle_core_beside_a_busy_one_is_accepted_and_the_busy_one_refused(tmp_path):
    # A process spinning on one core, the other idle, over two windows of 25 ticks.
    spinning = [{0: (0, 25), 1: (25, 0)}, {0: (1, 24), 1: (25, 0)}]
    fake = FakeStat(tmp_path / "stat", spinning)
    with pytest.raises(ContentionError, match="cpu core 1 is 100 % busy") as info:
        check_contention(1, threshold=0.5, candidates=[0, 1], proc_stat=fake.path, sleep=fake.sleep)
    assert "choose another --cpu-core (core 0 is 0 % busy)" in str(info.value)
    fake = FakeStat(tmp_path / "stat", spinning)
    labelled = check_contention(
        1, threshold=0.5, allow_busy=True, proc_stat=fake.path, sleep=fake.sleep
    )
    assert labelled.busy and labelled.allowed and labelled.busy_share == 1.0
    fake = FakeStat(tmp_path / "stat", spinning)
    reading = check_contention(
        0, threshold=0.5, candidates=[0, 1], proc_stat=fake.path, sleep=fake.sleep
    )
    assert reading.allowed and reading.busy is False
    assert reading.other_cores == {1: 1.0}


def test_a_real_core_is_read_from_proc_stat():
    # The real /proc/stat of this machine: what the reading holds, not how busy it is.
    cores = allowed_cores()
    reading = check_contention(cores[0], allow_busy=True, windows=2, candidates=cores)
    assert reading.source == "/proc/stat" and reading.core == cores[0]
    assert len(reading.windows) == 2 and reading.allowed and reading.allow_busy
    assert set(reading.other_cores) == set(cores) - {cores[0]}
    for share in (reading.busy_share, *reading.windows, *reading.other_cores.values()):
        assert share is None or 0.0 <= share <= 1.0
    if reading.busy_share is not None:
        assert reading.busy_share == min(w for w in reading.windows if w is not None)
        assert reading.busy == (reading.busy_share > reading.threshold)
    json.dumps(reading.to_json())
