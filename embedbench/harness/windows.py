"""The timing windows: where the clock reads and the release of the output sit.

The one home of their names and descriptions: ``timing`` implements them, ``config``
validates the choice, the report labels rows with them. No torch, no numpy.

- ``pr`` (default): the PR script's order, ``perf_counter``, ``thread_time``, the call,
  ``thread_time``, ``perf_counter``; the output is released after the completion clock.
  Host latency includes the two thread-clock reads and excludes freeing the output.
- ``tight``: the thread-clock reads outside the wall window (``thread_time``,
  ``perf_counter``, the call, ``perf_counter``, ``thread_time``); the output is still
  released after the completion clock. Host latency holds the call alone (plus one
  clock read), so the constant cost of the reads does not dilute a reduction.
- ``legacy``: how embedbench timed before the PR's window was its default (result
  directories without ``timing_window``): the reads outside, the output released inside
  the window. Only ever read, never measured.
"""

from __future__ import annotations

__all__ = ["DEFAULT_WINDOW", "DESCRIPTIONS", "LEGACY", "MEASURABLE", "PR", "TIGHT", "describe"]

PR = "pr"
TIGHT = "tight"
LEGACY = "legacy"
DEFAULT_WINDOW = PR
# The windows a run can measure with (``legacy`` is only read from old results).
MEASURABLE: tuple[str, ...] = (PR, TIGHT)

DESCRIPTIONS: dict[str, str] = {
    PR: (
        "the PR script's window: perf_counter, thread_time, call, thread_time, perf_counter; "
        "output released after the completion clock"
    ),
    TIGHT: (
        "tight window: thread_time, perf_counter, call, perf_counter, thread_time; "
        "output released after the completion clock"
    ),
    LEGACY: (
        "embedbench before the PR's window: thread_time, perf_counter, call and release of "
        "its output, perf_counter, thread_time"
    ),
}


def describe(window: str) -> str:
    """One line saying what ``window`` times (the name itself when unknown)."""
    return DESCRIPTIONS.get(window, window)
