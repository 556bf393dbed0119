"""A neighbour seen by its effect: the canary against the other cores' busy time.

The other cores' jiffies are read at every block edge; a run is noisy when the canary
reads slower while they are busy than while they idle. A neighbour that comes and goes
shows this way even when the host's own slow drift is larger than its effect.
"""

from __future__ import annotations

import numpy as np
import pytest

from embedbench.harness import isolation, stability, timing


def test_busy_cores_sums_each_cores_busy_share():
    before = {0: (100, 900), 2: (0, 0)}
    after = {0: (150, 950), 2: (10, 0), 3: (5, 5)}
    # core 0: 50 of 100 jiffies busy; core 2: all 10; core 3 not in both readings
    assert timing.busy_cores(before, after) == pytest.approx(1.5)
    assert timing.busy_cores(before, before) is None  # nothing elapsed
    assert timing.busy_cores(None, after) is None


def test_the_reader_keeps_only_the_other_cores(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  9 0 9 9 0 0 0 0 0 0\n"
        "cpu0 5 0 1 20 2 0 0 0 0 0\n"
        "cpu1 4 0 8 30 0 0 0 1 0 0\n"
        "intr 1 2 3\n"
    )
    read = isolation.other_cores_reader(1, cores=[0, 1], path=stat)
    assert read() == {0: (6, 22)}
    assert isolation.other_cores_reader(1, cores=[1], path=stat)() is None  # none other
    assert isolation.other_cores_reader(1, cores=[0], path=tmp_path / "missing")() is None


def _two_blocks(probes: timing.BlockProbes | None = None) -> list[timing.BlockRecord]:
    return timing.measure_pair(
        {"baseline": lambda: None, "fixed": lambda: None},
        **dict(case="text", tokens=300, warmup=0, blocks=2, iterations=2, seed=0),
        device="cpu",
        probes=probes,
    )


def test_every_block_half_records_the_other_cores_busy_time():
    readings = []

    def ticks() -> dict[int, tuple[int, int]]:
        readings.append(3 * len(readings))  # 3 busy jiffies more at every reading
        return {0: (readings[-1], 100)}

    records = _two_blocks(timing.BlockProbes(other_cores=ticks))
    # one reading per edge (a half starts where the one before it ended): 3 busy of 3
    assert [r.other_cores_busy for r in records] == [1.0] * 4
    assert len(readings) == len(records) + 1
    plain = _two_blocks()
    assert {r.other_cores_busy for r in plain} == {None}
    assert "other_cores_busy" in plain[0].to_json()


def _run(
    rng: np.random.Generator,
    *,
    effect: float,
    toggled: bool = True,
    drift: float = 0.1,
    halves: int = 240,
    workers: int = 5,
    calls_effect: float | None = None,
) -> list[dict]:
    """Records of a default-sized run (5 workers of 8 s, one after the other, 48 block
    halves each): every worker at its own level (lognormal, 8 % SD), the host drifting by
    ``drift`` over the run's 45 s, and a neighbour on for 3 s and off for 3 s (or always
    on) that slows the canary by ``effect`` and shows as one busy core. With
    ``calls_effect``, each half also carries 20 timed calls (host and CPU µs, 8 % noise
    each) that the neighbour slows by that much."""
    records = []
    per_worker = halves // workers
    for worker in range(workers):
        offset = rng.lognormal(0.0, 0.08)
        for i in range(per_worker):
            t = worker * 9.0 + 8.0 * i / per_worker
            on = (int(t // 3.0) % 2 == 1) if toggled else True
            speed = offset * (1.0 + drift * t / 45.0)
            case = ("text", "audio", "video")[(i // 8) % 3]
            level = {"text": 1300.0, "audio": 1500.0, "video": 1400.0}[case]
            canary = level * speed * (1.0 + effect * on) * rng.lognormal(0.0, 0.08)
            calls = {}
            if calls_effect is not None:
                host = 300.0 * speed * (1.0 + calls_effect * on) * rng.lognormal(0, 0.08, 20)
                calls = {"samples_us": [[h, h] for h in host.tolist()]}
            records.append(
                {
                    **calls,
                    "worker": worker,
                    "case": case,
                    "tokens": 1172,
                    "scope": "whole_wrapper",
                    "variant": ("baseline", "fixed")[i % 2],
                    "canary_us_end": canary,
                    "other_cores_busy": (1.0 if on else 0.0) + 0.02 * rng.random(),
                }
            )
    return records


def test_a_neighbour_that_comes_and_goes_is_seen_by_its_effect():
    rng = np.random.default_rng(21)
    caught = 0
    for _ in range(20):
        reading = stability.assess_host(_run(rng, effect=0.10))
        contrast = reading.neighbour
        assert contrast is not None and contrast["busy_reads"] >= 100
        caught += reading.noisy
        if reading.noisy:
            assert any("while other cores were busy" in r for r in reading.reasons)
    assert caught == 20


def test_busy_cores_that_do_not_slow_the_canary_are_no_reason():
    """A many-core box with unrelated busy cores: the cause without the effect."""
    rng = np.random.default_rng(22)
    readings = [stability.assess_host(_run(rng, effect=0.0)) for _ in range(200)]
    seen = [r for r in readings if any("other cores were busy" in x for x in r.reasons)]
    assert len(seen) <= 2  # the p limit is 0.01, the effect limit 5 %
    effects = [r.neighbour["effect"] for r in readings]
    assert abs(float(np.median(effects))) < 0.005


def test_a_neighbour_that_moves_the_calls_but_not_the_canary_is_seen_in_the_calls():
    """A neighbour that evicts the lookups' rows from a shared cache slows the calls,
    while the canary, whose rows are never cached, reads the same."""
    rng = np.random.default_rng(27)
    for _ in range(20):
        reading = stability.assess_host(_run(rng, effect=0.0, calls_effect=0.10))
        assert reading.noisy, reading.neighbour_calls
        assert reading.neighbour_calls["busy_reads"] >= 100
        assert any(r.startswith("the timed calls read") for r in reading.reasons)
        assert not any(r.startswith("the canary read") for r in reading.reasons)


def test_calls_that_do_not_move_with_busy_cores_are_no_reason():
    rng = np.random.default_rng(28)
    readings = [stability.assess_host(_run(rng, effect=0.0, calls_effect=0.0)) for _ in range(200)]
    assert sum(any("timed calls" in x for x in r.reasons) for r in readings) <= 2
    effects = [r.neighbour_calls["effect"] for r in readings]
    assert abs(float(np.median(effects))) < 0.005


def test_the_median_call_is_the_host_column_of_a_halfs_samples():
    assert stability.median_call_us({"samples_us": [[3.0, 1.0], [1.0, 1.0], [2.0, 9.0]]}) == 2.0
    assert stability.median_call_us({"samples_us": [5.0, 7.0, 6.0]}) == 6.0
    assert stability.median_call_us({"samples_us": []}) is None
    assert stability.median_call_us({}) is None


def test_an_effect_below_the_limit_is_not_called_however_significant():
    rng = np.random.default_rng(23)
    reading = stability.assess_host(_run(rng, effect=0.01, halves=2000))
    assert reading.neighbour["effect"] < stability.NEIGHBOUR_EFFECT_LIMIT
    assert reading.neighbour["p_value"] < stability.NEIGHBOUR_P_LIMIT
    assert reading.verdict == stability.STABLE


def test_a_neighbour_always_on_gives_no_contrast_and_says_so():
    reading = stability.assess_host(_run(np.random.default_rng(24), effect=0.3, toggled=False))
    contrast = reading.neighbour
    assert contrast["busy_reads"] == 0 and contrast["effect"] is None
    assert contrast["idle_floor_cores"] == pytest.approx(1.0, abs=0.05)


def test_runs_without_the_reading_have_no_contrast():
    records = [{"worker": 0, "canary_us_end": 700.0 + i} for i in range(20)]
    assert stability.neighbour_contrast(records) is None
    assert stability.assess_host(records).neighbour is None


def _stable_result(records: list[dict]):
    from pathlib import Path

    from embedbench.report.results import RunResult

    reading = stability.assess_host(records, other_cores_busy={"0": 1.0})
    assert reading.verdict == stability.STABLE, reading.reasons
    meta = {"status": "complete", "host_stability": reading.to_json()}
    return RunResult(Path("run"), meta, [], [], [])


def test_the_note_for_busy_other_cores_says_what_the_canary_saw_while_they_were():
    from embedbench.report import hostprose

    rng = np.random.default_rng(25)
    toggled = hostprose.host_note(_stable_result(_run(rng, effect=0.0)))
    assert "while they were busy against while they idled" in toggled
    assert "within the limit" in toggled
    always = hostprose.host_note(_stable_result(_run(rng, effect=0.0, toggled=False)))
    assert "busy the whole run" in always and "cannot tell their effect" in always


def test_busy_throughout_names_the_runs_whose_neighbour_could_not_be_contrasted():
    rng = np.random.default_rng(26)
    always = stability.assess_host(
        _run(rng, effect=0.0, toggled=False), other_cores_busy={"0": 1.0}
    ).to_json()
    toggled = stability.assess_host(_run(rng, effect=0.0), other_cores_busy={"0": 1.0})
    idle = stability.assess_host(_run(rng, effect=0.0, toggled=False), other_cores_busy={"0": 0.1})
    assert stability.busy_throughout(always)
    assert not stability.busy_throughout(toggled.to_json())  # it had idle halves to contrast
    assert not stability.busy_throughout(idle.to_json())  # no busy core named: no cause
    assert not stability.busy_throughout({})  # a run before the canary
