"""The parts of benchmarks/gpu_check.sh that need no run: the core it pins, and what its
report says about the run (the script's own runs: test_benchmarks_smoke.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import _common


@pytest.mark.parametrize(
    ("shares", "allowed", "expected"),
    [
        # An idle 16-core box: every core ties, and the PR's core 2 is allowed.
        ({c: 0.0 for c in range(16)}, range(16), 2),
        # Ties within a clock tick or two count as ties (2 % is one tick at HZ 100).
        ({0: 0.0, 1: 0.02, 2: 0.04, 3: 0.0}, range(4), 2),
        # Core 2 not allowed: the lowest tied core but 0.
        ({0: 0.0, 1: 0.0, 3: 0.0}, [0, 1, 3], 1),
        ({0: 0.0, 4: 0.01, 7: 0.0}, [0, 4, 7], 4),
        # Core 2 clearly busier than another: the least busy wins, not the PR's core.
        ({0: 0.0, 1: 0.3, 2: 0.5, 3: 0.0}, range(4), 3),
        # Core 0 clearly the least busy: it is taken (only a tie goes away from it).
        ({0: 0.0, 1: 0.4, 2: 0.6}, range(3), 0),
        # Unknown counts as busy; nothing known at all: all tie.
        ({0: 0.0, 1: None, 2: None, 3: 0.01}, range(4), 3),
        ({}, [0, 1, 5], 1),
        # A two-core VM: core 1, not 0, when both are idle.
        ({0: 0.0, 1: 0.0}, [0, 1], 1),
        ({0: 0.0}, [0], 0),
    ],
)
def test_the_least_busy_core_breaks_ties_to_core_2_then_away_from_core_0(
    shares: dict[int, float | None], allowed: list[int], expected: int
) -> None:
    assert _common.least_busy_core(shares, allowed) == expected


def test_the_least_busy_core_defaults_to_this_process_affinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_common.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert _common.least_busy_core({0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}) == 2
    monkeypatch.setattr(_common.os, "sched_getaffinity", lambda pid: {0, 5})
    assert _common.least_busy_core({0: 0.0, 5: 0.0}) == 5
