"""The memory ceiling (embedbench/harness/bandwidth.py) and each form's achieved bandwidth
against it (embedbench/report/bandwidth.py; docs/method.md, "The memory ceiling").

The ceiling's JSON comes from a simulated run (its host's knob) and from the real copy
on a small buffer under a fake clock, so the arithmetic is exact and no real timing is
asserted; the achieved bandwidth is checked on a run built by hand, and a run directory
written before the ceiling loads and renders without one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from embedbench.config import RunConfig
from embedbench.harness import bandwidth as ceiling
from embedbench.harness import clock
from embedbench.report import bandwidth, prcomment, schema, sections
from embedbench.report.results import WORK, RunResult, load_results
from embedbench.sim import SimulatedHost, simulate_run

MIB = 2**20
FIELDS = ("bytes_per_s", "buffer_bytes", "repetitions", "core", "best_s", "seconds")


@pytest.fixture(scope="module")
def simulated() -> RunResult:
    """Two cases of the default design on the simulated host, its ceiling 10 GB/s."""
    config = RunConfig(cases="text,audio", lengths=1172)
    return simulate_run(config, SimulatedHost(memory_bytes_per_s=10e9), seed=3)


# -- the ceiling ---------------------------------------------------------------------------


def test_a_simulated_run_records_its_hosts_ceiling_in_metadata(simulated):
    found = simulated.metadata["memory_ceiling"]
    assert set(FIELDS) <= set(found)
    assert found["bytes_per_s"] == 10e9 and found["reason"] is None
    assert found["buffer_bytes"] == ceiling.MAX_BUFFER_BYTES
    assert found["repetitions"] == ceiling.REPETITIONS
    assert found["core"] == simulated.metadata["cpu_core"] == 0
    assert found["best_s"] == pytest.approx(2 * ceiling.MAX_BUFFER_BYTES / 10e9)
    assert found["seconds"] == 0.0  # no simulated time is spent on it
    assert found["method"].startswith("simulated")
    json.dumps(found)  # plain JSON
    pytest.importorskip("jsonschema")
    assert schema.first_problem("metadata.json", simulated.metadata, "embedbench") is None


def test_the_simulated_host_has_a_default_ceiling():
    result = simulate_run(RunConfig(cases="text", lengths=300), SimulatedHost(), seed=1)
    assert result.metadata["memory_ceiling"]["bytes_per_s"] == SimulatedHost().memory_bytes_per_s
    assert SimulatedHost().memory_bytes_per_s > 0


def test_a_bad_ceiling_fails_the_schema(simulated):
    pytest.importorskip("jsonschema")
    metadata = {**simulated.metadata, "memory_ceiling": {"bytes_per_s": -1.0}}
    problem = schema.first_problem("metadata.json", metadata, "embedbench")
    assert problem and "memory_ceiling" in problem


@pytest.mark.parametrize(
    ("cache", "buffer"),
    [
        (None, ceiling.MAX_BUFFER_BYTES),
        (MIB, ceiling.MIN_BUFFER_BYTES),
        (16 * MIB, 128 * MIB),
        (480 * MIB, ceiling.MAX_BUFFER_BYTES),
    ],
)
def test_the_buffer_is_eight_caches_within_its_bounds(cache, buffer, monkeypatch):
    monkeypatch.delenv(ceiling.BUFFER_ENV, raising=False)  # the suite sets a small one
    assert ceiling.buffer_size(cache) == buffer


def test_the_environment_sets_the_buffer_in_mib(monkeypatch):
    monkeypatch.setenv(ceiling.BUFFER_ENV, "4")
    assert ceiling.buffer_size(None) == ceiling.buffer_size(480 * MIB) == 4 * MIB


def test_a_copy_moves_its_buffer_twice():
    assert ceiling.copy_rate(100, 2.0) == 100.0  # 100 read + 100 written in 2 s
    with pytest.raises(ValueError):
        ceiling.copy_rate(100, 0.0)


class _TickClock:
    """The real clock, except that every read of ``perf_ns`` moves it by 1 ms."""

    def __init__(self) -> None:
        self.ns = 0

    def perf_ns(self) -> int:
        self.ns += 1_000_000
        return self.ns

    def __getattr__(self, name: str):
        return getattr(clock.REAL_CLOCK, name)


def test_the_copy_runs_on_the_core_and_is_timed_on_the_kits_clock(monkeypatch):
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    seen: list[set[int]] = []
    copy = np.copyto

    def watched(*args, **kwargs):
        seen.append(os.sched_getaffinity(0))
        return copy(*args, **kwargs)

    monkeypatch.setattr(np, "copyto", watched)
    with clock.using(_TickClock()):
        found = ceiling.measure_ceiling(core, buffer_bytes=MIB, repetitions=3)
    assert seen == [{core}] * 4  # one untimed copy, three timed, all on the core
    assert os.sched_getaffinity(0) == before
    assert found.best_s == 0.001  # each timed copy spans one tick of the fake clock
    assert found.bytes_per_s == 2 * MIB / 0.001
    assert found.to_json()["core"] == core and found.reason is None


class _SlowClock(_TickClock):
    """Every read of ``perf_ns`` moves it by 200 ms: a host whose every copy is slow."""

    def perf_ns(self) -> int:
        self.ns += 200_000_000
        return self.ns


def test_a_slow_host_stops_at_the_budget_but_never_below_two_copies():
    core = min(os.sched_getaffinity(0))
    with clock.using(_SlowClock()):
        found = ceiling.measure_ceiling(core, buffer_bytes=MIB)
    assert found.repetitions == ceiling.MIN_REPETITIONS == 2  # 0.5 s passed at the second
    assert found.best_s == pytest.approx(0.2)
    with clock.using(_TickClock()):
        quick = ceiling.measure_ceiling(core, buffer_bytes=MIB)
    assert quick.repetitions == ceiling.REPETITIONS  # well within the budget: all five


def test_a_core_it_may_not_use_gives_no_ceiling_and_says_why():
    before = os.sched_getaffinity(0)
    found = ceiling.measure_ceiling(4096, buffer_bytes=MIB)
    assert found.bytes_per_s is None and found.core is None
    assert "could not run on cpu core 4096" in found.reason
    assert os.sched_getaffinity(0) == before


def test_no_memory_for_the_buffers_gives_no_ceiling_and_restores_the_affinity(monkeypatch):
    def refuse(size: int, repetitions: int, deadline_ns: float) -> list[float]:
        raise MemoryError

    monkeypatch.setattr(ceiling, "_timed_copies", refuse)
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    found = ceiling.measure_ceiling(core, buffer_bytes=MIB)
    assert found.bytes_per_s is None and "two 1 MiB buffers" in found.reason
    assert found.repetitions == 0
    assert os.sched_getaffinity(0) == before


# -- achieved bandwidth ----------------------------------------------------------------


def _ledger(case: str, variant: str, read: int, written: int) -> dict:
    return {
        "case": case,
        "tokens": 100,
        "variant": variant,
        "ops": {"aten.embedding": 1},
        "bytes_read": read,
        "bytes_written": written,
        "bytes_allocated": written,
        "syncs": 0,
        "kernels": None,
    }


def _summary(case: str, baseline_us: float, fixed_us: float) -> dict:
    return {
        "case": case,
        "tokens": 100,
        "valid": True,
        "host_us": {"baseline": baseline_us, "fixed": fixed_us},
    }


def hand_built(ceiling_bytes_per_s: float | None = 20e9) -> RunResult:
    """Audio: 30 MB in 2000 µs, then 15 MB in 1500 µs; Text: 10 MB in 400 µs both."""
    metadata = {
        "schema_version": 6,
        "status": "complete",
        "lengths": [100],
        "cases": ["text", "audio"],
    }
    if ceiling_bytes_per_s is not None:
        metadata["memory_ceiling"] = {
            "bytes_per_s": ceiling_bytes_per_s,
            "buffer_bytes": 256 * MIB,
            "repetitions": 5,
            "core": 0,
            "seconds": 0.31,
        }
    work = [
        _ledger("text", "baseline", 6_000_000, 4_000_000),
        _ledger("text", "fixed", 6_000_000, 4_000_000),
        _ledger("audio", "baseline", 20_000_000, 10_000_000),
        _ledger("audio", "fixed", 10_000_000, 5_000_000),
    ]
    summary = [_summary("text", 400.0, 400.0), _summary("audio", 2000.0, 1500.0)]
    return RunResult(None, metadata, [], [], summary, [], work)


def test_the_rate_is_bytes_moved_over_the_headline_latency():
    assert bandwidth.achieved(30e6, 2000.0, 20e9) == (15e9, 0.75)
    assert bandwidth.achieved(30e6, 2000.0) == (15e9, None)
    with pytest.raises(ValueError):
        bandwidth.achieved(1.0, 0.0, 1e9)


def test_every_form_gets_its_rate_and_share_of_the_ceiling():
    rows = {(r.case, r.variant): r for r in bandwidth.achieved_rows(hand_built())}
    assert [key for key in rows] == [
        ("text", "baseline"),
        ("text", "fixed"),
        ("audio", "baseline"),
        ("audio", "fixed"),
    ]
    audio, fixed = rows["audio", "baseline"], rows["audio", "fixed"]
    assert audio.bytes_moved == 30_000_000 and audio.host_us == 2000.0
    assert audio.bytes_per_s == pytest.approx(15e9) and audio.share == pytest.approx(0.75)
    assert fixed.bytes_per_s == pytest.approx(10e9) and fixed.share == pytest.approx(0.5)
    assert rows["text", "fixed"].share == pytest.approx(25e9 / 20e9)  # above: cache-resident


def test_the_table_and_its_caption():
    result = hand_built()
    table = bandwidth.bandwidth_table(result)
    assert list(table.columns) == list(bandwidth.BANDWIDTH_COLUMNS)
    audio = table[table["Input"] == "Audio"].iloc[0].to_dict()
    assert audio == {
        "Input": "Audio",
        "Moved per call": "30.00 MB → 15.00 MB",
        "Before (GB/s)": "15.00",
        "After (GB/s)": "10.00",
        "Before, of ceiling": "75 %",
        "After, of ceiling": "50 %",
    }
    caption = bandwidth.bandwidth_caption(result)
    assert "20.0 GB/s (a streaming copy of 256 MiB on core 0, best of 5, 0.31 s)" in caption
    assert "near 100 %" in caption and "still has time to win" in caption
    assert bandwidth.share_sentence(result) == (
        "Memory bandwidth per call, of a 20.0 GB/s copy ceiling: baseline 75–125 %, fixed "
        "50–125 % (near 100 %: at the memory system's limit)."
    )


def test_without_a_ceiling_the_rates_stay_and_the_shares_go():
    result = hand_built(None)
    table = bandwidth.bandwidth_table(result)
    assert set(table["Before, of ceiling"]) == {"n/a"}
    assert list(table["Before (GB/s)"]) == ["25.00", "15.00"]
    assert "no memory ceiling recorded, so no share" in bandwidth.bandwidth_caption(result)
    assert bandwidth.share_sentence(result) is None
    failed = hand_built(None)
    failed.metadata["memory_ceiling"] = {"bytes_per_s": None, "reason": "no memory"}
    assert "not measured (no memory)" in bandwidth.bandwidth_caption(failed)


def test_a_device_run_gets_its_rates_and_no_share_of_the_hosts_ceiling():
    result = hand_built()
    result.metadata["device"] = "cuda"
    rows = bandwidth.achieved_rows(result)
    assert [r.share for r in rows] == [None] * 4
    assert rows[2].bytes_per_s == pytest.approx(15e9)
    assert set(bandwidth.bandwidth_table(result)["After, of ceiling"]) == {"n/a"}
    assert "No share" in bandwidth.bandwidth_caption(result)
    assert "device memory" in bandwidth.bandwidth_caption(result)
    assert bandwidth.share_sentence(result) is None


def test_the_report_section_and_the_pr_comment(simulated):
    table, note = sections.memory_bandwidth(simulated)
    assert list(table.frame["Input"]) == ["Text", "Audio"]
    assert note.text == bandwidth.bandwidth_caption(simulated)
    titles = [s.title for s in sections.REPORT_SECTIONS]
    assert titles.index("Memory bandwidth per call") == titles.index("Work per call") + 1
    comment = prcomment.comment_markdown(simulated)
    sentence = bandwidth.share_sentence(simulated)
    assert sentence and sentence in comment
    assert comment.index("**Work per call**") < comment.index(sentence)
    assert comment.index(sentence) < comment.index("**Interval and verdict**")


def test_a_run_without_a_ledger_says_so(simulated):
    bare = RunResult(None, simulated.metadata, [], [], simulated.summary)
    [note] = sections.memory_bandwidth(bare)
    assert "No bandwidth without a per-call ledger" in note.text


def test_a_run_dir_written_before_the_ceiling_loads_and_renders(simulated, tmp_path: Path):
    directory = tmp_path / "before-the-ceiling"
    directory.mkdir()
    metadata = {k: v for k, v in simulated.metadata.items() if k != "memory_ceiling"}
    files = {
        "metadata.json": metadata,
        "micro-raw.json": simulated.records,
        "validation.json": simulated.validation,
        "summary.json": simulated.summary,
        WORK: simulated.work,
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data), encoding="utf-8")
    loaded = load_results(directory)
    assert "memory_ceiling" not in loaded.metadata
    table, note = sections.memory_bandwidth(loaded)
    assert set(table.frame["After, of ceiling"]) == {"n/a"}
    assert "no memory ceiling recorded" in note.text
    assert bandwidth.share_sentence(loaded) is None
    assert "Memory bandwidth per call" not in prcomment.comment_markdown(loaded)
