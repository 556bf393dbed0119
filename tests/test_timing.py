"""Schedule balance and seeding, the timed call, and block records."""

from collections import Counter

import pytest
from helpers import StepClock

from embedbench.harness import clock as clock_seam
from embedbench.harness import timing


@pytest.mark.parametrize("blocks", [1, 2, 6, 7, 20, 21])
def test_schedule_is_balanced(blocks):
    schedule = timing.block_schedule(("baseline", "fixed"), blocks, seed=11)
    assert len(schedule) == blocks
    firsts = Counter(order[0] for order in schedule)
    assert abs(firsts["baseline"] - firsts["fixed"]) <= 1
    assert all(sorted(order) == ["baseline", "fixed"] for order in schedule)


def test_schedule_is_seeded():
    a = timing.block_schedule(("baseline", "fixed"), 20, seed=1)
    assert a == timing.block_schedule(("baseline", "fixed"), 20, seed=1)
    others = [timing.block_schedule(("baseline", "fixed"), 20, seed=s) for s in range(2, 8)]
    assert any(o != a for o in others)


def test_derived_seed_depends_on_case_not_on_name_length():
    # audio, image and video have 5-letter names: the original script gave them one order.
    seeds = {case: timing.derive_seed(0, case, 1172) for case in ("audio", "image", "video")}
    assert len(set(seeds.values())) == 3
    schedules = {
        case: tuple(timing.block_schedule(("baseline", "fixed"), 20, seed))
        for case, seed in seeds.items()
    }
    assert len(set(schedules.values())) == 3
    assert timing.derive_seed(0, "audio", 1172) == timing.derive_seed(0, "audio", 1172)
    assert timing.derive_seed(0, "audio", 1172) != timing.derive_seed(1, "audio", 1172)
    assert timing.derive_seed(0, "audio", 1172) != timing.derive_seed(0, "audio", 512)


def test_time_calls_records_three_clocks_per_call():
    # A 200 µs call on a seeded clock whose every read costs 0.1 µs on the CPU.
    clock = StepClock(read_ns=100, jitter=0.0)
    syncs = []
    with clock_seam.using(clock):
        samples = timing.time_calls(clock.work(200), 5, sync=lambda: syncs.append(1))
    assert len(samples) == 5
    assert len(syncs) == 10  # one sync before and one after each call
    for host, cpu, completion in samples:
        # The PR's window: host spans a thread read, the call, a thread read and a wall
        # read; the thread clock, read inside the wall one, sees the call and one read;
        # completion adds the wall read after the sync.
        assert host == pytest.approx(200.3) and cpu == pytest.approx(200.1)
        assert completion == pytest.approx(200.4)


def test_time_calls_host_latency_excludes_the_sync_before():
    clock = StepClock(read_ns=100, jitter=0.0)
    with clock_seam.using(clock):
        samples = timing.time_calls(lambda: None, 5, sync=clock.work(2000))
    for host, _cpu, completion in samples:
        # The 2 ms sync after the call is part of completion and never of host latency,
        # nor is the one before it: host holds the empty call's clock reads alone.
        assert host == pytest.approx(0.3)
        assert completion - host == pytest.approx(2000.1)


def test_measure_pair_records_every_block_and_reports_progress():
    done = []
    seed = timing.derive_seed(0, "audio", 300)
    records = timing.measure_pair(
        {"baseline": lambda: None, "fixed": lambda: None},
        case="audio",
        tokens=300,
        warmup=3,
        blocks=6,
        iterations=4,
        seed=seed,
        device="cpu",
        progress=done.append,
    )
    assert len(records) == 12
    assert sum(done) == 2 * (3 + 6 * 4)  # each variant: warm-up plus blocks × iterations
    schedule = timing.block_schedule(("baseline", "fixed"), 6, seed)
    for record in records:
        assert record.variant == schedule[record.block][record.position]
        assert record.iterations == 4 and len(record.samples_us) == 4
        assert record.scope == timing.MICRO_SCOPE and record.case == "audio"
        assert record.wall_end >= record.wall_start


def test_measure_pair_needs_two_variants():
    with pytest.raises(ValueError):
        timing.measure_pair(
            {"baseline": lambda: None},
            case="x",
            tokens=0,
            warmup=0,
            blocks=1,
            iterations=1,
            seed=0,
            device="cpu",
        )


def test_timer_floor_is_ten_blocks_of_a_hundred_empty_calls():
    records = timing.measure_timer_floor(device="cpu", probes=timing.BlockProbes())
    assert len(records) == 10
    assert all(r.case == "timer" and r.scope == "overhead" for r in records)
    assert all(len(r.samples_us) == 100 for r in records)
    assert all(r.cpu_mhz_start is None for r in records)


class _ClockLog:
    """A fake ``time`` module whose clocks log their reads and advance one tick (1 µs)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.tick = 0

    def _read(self, name: str) -> int:
        self.events.append(name)
        self.tick += 1000
        return self.tick

    def perf_ns(self) -> int:
        return self._read("wall")

    def thread_ns(self) -> int:
        return self._read("thread")

    def call(self) -> object:
        self.events.append("call")
        self.tick += 1000
        log = self.events

        class Output:
            def __del__(self) -> None:
                log.append("release")

        return Output()


PR_ORDER = ["wall", "thread", "call", "thread", "wall", "release"]
TIGHT_ORDER = ["thread", "wall", "call", "wall", "thread", "release"]


@pytest.mark.parametrize(
    ("window", "order", "host_ticks", "cpu_ticks"),
    [("pr", PR_ORDER, 4, 2), ("tight", TIGHT_ORDER, 2, 4)],
    ids=["pr", "tight"],
)
def test_the_window_places_clock_reads_and_releases_the_output_after(
    monkeypatch, window, order, host_ticks, cpu_ticks
):
    clock = _ClockLog()
    with clock_seam.using(clock):
        samples = timing.time_calls(clock.call, 2, window=window)
    assert clock.events == order * 2
    for host, cpu, completion in samples:
        # pr: host spans the two thread-clock reads and the call; tight: the call alone
        assert host == host_ticks
        assert cpu == cpu_ticks  # pr: the call and a wall read; tight: the call and 2 reads
        assert completion == host  # no device: completion is the host latency (w2 = w1)


def test_the_pr_window_syncs_then_reads_the_completion_clock_before_releasing(monkeypatch):
    clock = _ClockLog()
    with clock_seam.using(clock):
        timing.time_calls(clock.call, 1, sync=lambda: clock.events.append("sync"), window="pr")
    assert clock.events == ["sync", *PR_ORDER[:-1], "sync", "wall", "release"]


def test_the_default_window_is_the_pr_scripts():
    assert timing.DEFAULT_WINDOW == "pr"
    with pytest.raises(ValueError, match="unknown timing window"):
        timing.time_calls(lambda: None, 1, window="legacy")


def test_timer_floor_warms_up_like_the_cases_through_the_same_window(monkeypatch):
    calls = []
    windows = []
    real = timing.time_calls

    def spy(fn, count, sync=timing.no_sync, window=timing.DEFAULT_WINDOW):
        windows.append(window)
        return real(fn, count, sync, window)

    monkeypatch.setattr(timing, "time_calls", spy)
    monkeypatch.setattr(timing, "_empty_call", lambda: calls.append(1))
    records = timing.measure_timer_floor(device="cpu", warmup=50, window="tight")
    assert len(calls) == 50 + 10 * 100
    assert set(windows) == {"tight"} and len(windows) == 1 + 10
    assert [r.variant for r in records] == ["timer_floor"] * 10


def test_the_pr_windows_floor_holds_the_thread_clock_reads():
    # The empty call's latency in the PR's window spans its two thread-clock reads and a
    # wall read; in the tight window, the wall read alone (0.1 µs a read here).
    medians = {}
    for window in ("pr", "tight"):
        clock = StepClock(read_ns=100, jitter=0.0)
        with clock_seam.using(clock):
            records = timing.measure_timer_floor(device="cpu", warmup=50, window=window)
        host = sorted(s[0] for r in records for s in r.samples_us)
        medians[window] = host[len(host) // 2]
    assert medians == {"pr": pytest.approx(0.3), "tight": pytest.approx(0.1)}
