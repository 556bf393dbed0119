"""This host's stored quiet memory level: a neighbour that never pauses, seen against it.

A neighbour on for a whole run leaves no idle block half to contrast with
(``stability.neighbour_contrast``), so a run is judged against the median memory level
(canary over pace) of this host's recent stable runs, kept between runs by ``hostref``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from embedbench.harness import hostref, stability
from embedbench.report import hostprose
from embedbench.report.results import RunResult

NOW = 1_800_000_000.0


def _probes(level: float, n: int = 35, *, pace: float = 30.0, seed: int = 0) -> list[dict]:
    """Probe readings as a run records them, their canary over pace near ``level``."""
    rng = np.random.default_rng(seed)
    return [
        {"median_us": level * pace * rng.lognormal(0.0, 0.03), "pace_us": pace, "quiet": True}
        for _ in range(n)
    ]


def _history(levels: list[float], *, age_s: float = 60.0) -> list[dict]:
    return [
        {"level": level, "time": NOW - age_s * (len(levels) - i)} for i, level in enumerate(levels)
    ]


def test_the_memory_level_is_the_median_canary_over_pace_of_the_probes():
    probes = [
        {"median_us": 600.0, "pace_us": 30.0},
        {"median_us": 660.0, "pace_us": 30.0},
        {"median_us": 700.0, "pace_us": 20.0},
        {"median_us": 650.0},  # a probe of a run before the pace: left out
    ]
    assert stability.memory_level(probes) == pytest.approx(22.0)
    assert stability.memory_level([{"median_us": 600.0}]) is None
    assert stability.memory_level([]) is None


def test_a_reference_needs_enough_recent_runs_and_reads_the_newest():
    assert stability.reference_from(_history([20.0, 21.0]), NOW).level is None
    reference = stability.reference_from(_history([20.0, 21.0, 22.0]), NOW)
    assert reference.level == pytest.approx(21.0) and reference.runs == 3
    assert reference.since == pytest.approx(NOW - 180.0)
    # Older than an hour: not this host's state any more.
    stale = _history([20.0, 21.0, 22.0], age_s=stability.REFERENCE_MAX_AGE_S / 2)
    assert stability.reference_from(stale, NOW).runs == 2
    # Only the newest REFERENCE_KEEP count.
    many = _history([40.0] * 5 + [20.0] * stability.REFERENCE_KEEP, age_s=10.0)
    assert stability.reference_from(many, NOW).level == pytest.approx(20.0)
    # An entry from the future (a clock set back) is no reference either.
    assert stability.reference_from([{"level": 20.0, "time": NOW + 60}] * 3, NOW).runs == 0


def test_a_run_well_above_the_reference_is_noisy_and_says_why():
    reference = stability.reference_from(_history([20.0, 20.5, 19.5]), NOW)
    slow = stability.assess_host([], probes=_probes(20.0 * 1.15), reference=reference)
    assert slow.verdict == stability.NOISY
    assert any("quiet reference" in r and "never paused" in r for r in slow.reasons), slow
    assert slow.host_reference["over"] == pytest.approx(0.15, abs=0.02)
    near = stability.assess_host([], probes=_probes(20.0 * 1.02, seed=1), reference=reference)
    assert near.verdict == stability.STABLE, near.reasons
    assert near.host_reference["over"] < stability.REFERENCE_LEVEL_LIMIT
    assert near.memory_level == pytest.approx(20.4, rel=0.02)


def test_the_limit_follows_the_spread_of_the_references_own_runs():
    # Too few runs for a spread: the fixed ceiling.
    few = stability.reference_from(_history([20.0, 20.1, 19.9, 20.0]), NOW)
    assert few.spread is None and few.limit() == stability.REFERENCE_LEVEL_LIMIT
    # Quiet runs that agree within a few tenths of a per cent: the floor.
    tight = stability.reference_from(_history([20.0, 20.1, 19.9, 20.05, 19.95, 20.0]), NOW)
    assert tight.spread == pytest.approx(1.4826 * 0.05 / 20.0)
    assert tight.limit() == stability.REFERENCE_LEVEL_FLOOR
    # A run 7 % slower: let through by the ceiling, labelled against a tight reference.
    slower = _probes(20.0 * 1.07, seed=2)
    assert stability.assess_host([], probes=slower, reference=few).verdict == stability.STABLE
    caught = stability.assess_host([], probes=slower, reference=tight)
    assert caught.verdict == stability.NOISY, caught
    assert caught.host_reference["limit"] == stability.REFERENCE_LEVEL_FLOOR
    assert "limit 5 %" in caught.reasons[0]
    # Between floor and ceiling: REFERENCE_SPREADS spreads (here 2 % each).
    levels = [20.0 * (1 + 0.02 * z / 1.4826) for z in (-2, -1, 0, 1, 2)]
    middle = stability.reference_from(_history(levels), NOW)
    assert middle.spread == pytest.approx(0.02, rel=1e-6)
    assert middle.limit() == pytest.approx(stability.REFERENCE_SPREADS * 0.02)
    # A drifting host keeps the ceiling: its quiet runs would cross a tighter limit.
    drifting = stability.reference_from(_history([18.0, 19.0, 20.0, 21.0, 22.0, 20.5]), NOW)
    assert drifting.limit() == stability.REFERENCE_LEVEL_LIMIT


def test_without_a_reference_the_level_is_recorded_and_judges_nothing():
    young = stability.reference_from(_history([20.0]), NOW)
    reading = stability.assess_host([], probes=_probes(40.0), reference=young)
    assert reading.verdict == stability.STABLE
    assert reading.host_reference == {
        "level": None,
        "runs": 1,
        "since": None,
        "spread": None,
        "over": None,
        "limit": stability.REFERENCE_LEVEL_LIMIT,
    }
    unkept = stability.assess_host([], probes=_probes(40.0))  # paired_benchmark keeps none
    assert unkept.host_reference is None and unkept.memory_level == pytest.approx(40.0, rel=0.02)


def test_a_probe_carries_the_median_of_its_pace_reads_after_the_first():
    reading = stability.read_probe([700.0] * 17)
    paced = stability.with_pace(reading, [90.0, 30.0, 31.0, 29.0])
    assert paced.pace_us == pytest.approx(30.0) and paced.median_us == reading.median_us
    assert paced.to_json()["pace_us"] == pytest.approx(30.0)
    assert stability.with_pace(reading, []) is reading


def test_only_a_stable_run_whose_other_cores_idled_joins_the_reference():
    quiet = {"verdict": "stable", "memory_level": 21.0, "neighbour": {"idle_floor_cores": 0.02}}
    assert stability.joins_reference(quiet)
    # A neighbour there the whole run would teach the reference its own level.
    assert not stability.joins_reference({**quiet, "neighbour": {"idle_floor_cores": 1.0}})
    assert not stability.joins_reference({**quiet, "neighbour": None})
    assert not stability.joins_reference({**quiet, "verdict": "noisy"})
    assert not stability.joins_reference({**quiet, "memory_level": None})


def test_the_store_keeps_each_keys_newest_entries(tmp_path: Path):
    path = tmp_path / "sub" / "host-reference.json"
    assert hostref.load(path, "a") == []
    for i in range(5):
        assert hostref.append(path, "a", {"level": 20.0 + i, "time": NOW + i}, keep=3)
    assert hostref.append(path, "b", {"level": 9.0, "time": NOW})
    assert [e["level"] for e in hostref.load(path, "a")] == [22.0, 23.0, 24.0]
    assert hostref.load(path, "b") == [{"level": 9.0, "time": NOW}]
    assert set(hostref.load_all(path)) == {"a", "b"}
    assert not list(path.parent.glob(".host-reference.json.*"))  # no temporary file left


def test_a_damaged_store_reads_empty_and_an_unwritable_one_fails_quietly(tmp_path: Path):
    path = tmp_path / "host-reference.json"
    path.write_text("{not json")
    assert hostref.load_all(path) == {}
    assert hostref.append(path, "a", {"level": 20.0, "time": NOW})
    assert hostref.load(path, "a") == [{"level": 20.0, "time": NOW}]
    path.write_text(json.dumps({"a": "no list", "b": [1, {"level": 2.0}]}))
    assert hostref.load_all(path) == {"b": [{"level": 2.0}]}
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert hostref.append(blocked / "host-reference.json", "a", {"level": 1.0}) is False


def test_the_key_names_what_makes_levels_comparable():
    canary = {"rows": 586, "bytes": 4200448, "source": "embedding table", "pace": "blake2b"}
    key = hostref.host_key("AMD EPYC", 1, "cpu", canary)
    assert key == hostref.host_key("AMD EPYC", 1, "cpu", dict(canary))
    others = [
        hostref.host_key("Intel Xeon", 1, "cpu", canary),
        hostref.host_key("AMD EPYC", 0, "cpu", canary),
        hostref.host_key("AMD EPYC", 1, "cuda", canary),
        hostref.host_key("AMD EPYC", 1, "cpu", {**canary, "rows": 2048}),
    ]
    assert key not in others and len(set(others)) == len(others)


def _always_busy_result(reference: stability.HostReference) -> RunResult:
    """A stable run whose other core was busy in every block half."""
    records = [
        {
            "worker": w,
            "case": "text",
            "tokens": 1172,
            "scope": "whole_wrapper",
            "variant": ("baseline", "fixed")[i % 2],
            "canary_us_end": 700.0 * (1 + 0.01 * (i % 3)),
            "other_cores_busy": 1.0,
        }
        for w in range(3)
        for i in range(20)
    ]
    reading = stability.assess_host(
        records, probes=_probes(20.0), other_cores_busy={"0": 1.0}, reference=reference
    )
    assert reading.verdict == stability.STABLE, reading.reasons
    meta = {"status": "complete", "host_stability": reading.to_json()}
    return RunResult(Path("run"), meta, [], [], [])


def test_the_note_for_cores_busy_all_run_reads_the_reference_where_there_is_one():
    kept = stability.reference_from(_history([20.0, 20.2, 19.8]), NOW)
    note = hostprose.host_note(_always_busy_result(kept))
    assert "busy the whole run" in note and "quiet reference (3 stable runs)" in note
    assert "within the limit" in note
    none = hostprose.host_note(_always_busy_result(stability.reference_from([], NOW)))
    assert "cannot tell their effect" in none and "no quiet reference yet (0 of the 3" in none


@pytest.mark.e2e
def test_a_stable_run_joins_the_reference_and_the_next_run_reads_it(
    small_checkpoint: Path, tmp_path: Path
):
    from embedbench import RunConfig, run

    store = Path(os.environ[hostref.REFERENCE_ENV])

    def one(name: str):
        config = RunConfig(
            model=str(small_checkpoint),
            lengths=300,
            cases=["text"],
            warmup=2,
            blocks=4,
            iterations=3,
            processes=2,
            output_dir=str(tmp_path / name),
            allow_busy=True,
        )
        return run(config, progress=False, log=lambda _message: None)

    first = one("first")
    reading = first.metadata["host_stability"]
    assert reading["memory_level"] > 0
    assert reading["host_reference"]["runs"] == 0  # nothing kept before it
    assert all(p["pace_us"] > 0 for p in first.metadata["host_probes"])
    assert "blake2b" in first.metadata["canary"]["pace"]
    kept = hostref.load_all(store)
    if not stability.joins_reference(reading):  # noisy, or the other core never idled
        assert kept == {}
        return
    (entries,) = kept.values()
    assert entries[0]["level"] == pytest.approx(reading["memory_level"])
    assert entries[0]["run"] == str(tmp_path / "first")
    second = one("second")
    assert second.metadata["host_stability"]["host_reference"]["runs"] == 1
