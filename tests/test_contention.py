"""The contention guard: /proc/stat parsing, the refusal, and a real busy core."""

import json
import os
import subprocess
import sys
import time
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


BUSY_LOOP = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {%d})\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "while True:\n"
    "    pass\n"
)


# A real core is judged over the default window (the tests' short one spans ~2 ticks).
REAL_WINDOW = CONTENTION_WINDOW_S


@pytest.mark.e2e  # seconds: see TIERS in conftest.py
def test_real_busy_process_is_refused_and_an_idle_core_accepted():
    cores = allowed_cores()
    if len(cores) < 2:
        pytest.skip("needs two allowed cores: one to load, one to stay idle")
    # Keep this test process (and pytest) on the quieter core, load another.
    now = check_contention(cores[0], allow_busy=True, windows=1)
    shares = {cores[0]: now.busy_share, **now.other_cores}
    idle_core = min(cores, key=lambda c: 2.0 if shares.get(c) is None else shares[c])
    busy_core = next(c for c in cores if c != idle_core)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {idle_core})
    busy = subprocess.Popen(
        [sys.executable, "-c", BUSY_LOOP % busy_core],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # let the loop run for a while before sampling
        with pytest.raises(ContentionError, match=f"cpu core {busy_core} is \\d+ % busy"):
            check_contention(busy_core, threshold=0.5, candidates=cores, window_s=REAL_WINDOW)
        labelled = check_contention(busy_core, threshold=0.5, allow_busy=True, window_s=REAL_WINDOW)
        assert labelled.busy and labelled.allowed and labelled.busy_share > 0.9

        # The idle core: other work on this machine (not this test) may keep it busy for a
        # while, and then refusing it is the right answer; retry before concluding.
        last = None
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            try:
                reading = check_contention(
                    idle_core, threshold=0.5, candidates=cores, window_s=REAL_WINDOW
                )
            except ContentionError as exc:
                last = exc.reading
                time.sleep(1.0)
                continue
            assert reading.allowed and reading.busy is False
            assert reading.other_cores[busy_core] > 0.9
            break
        else:
            pytest.skip(
                f"core {idle_core} stayed busy ({last.busy_share:.0%}) with load from outside "
                "this test; the guard refused it correctly, acceptance could not be shown"
            )
    finally:
        busy.kill()
        busy.wait()
        busy.stdout.close()
        os.sched_setaffinity(0, saved)
