"""The words that say what a run's host verdict means: the canary's verdict, the line a
noisy host gets, the note a stable host with busy other cores gets, and the label of a
run measured on a busy core or busy I/O (docs/method.md).

The report banner, the CLI's table, the gate, the PR comment and the figures all read
the host's state through these, so they say the same thing.
"""

from __future__ import annotations

from typing import Any

from embedbench.harness.stability import (
    NOISY,
    REFERENCE_MIN_RUNS,
    STABLE,
    busy_throughout,
    likely_cause,
)
from embedbench.report.results import RunResult

__all__ = [
    "NOT_OBSERVED",
    "busy_label",
    "guard_labels",
    "host_label",
    "host_note",
    "host_verdict",
]

NOT_OBSERVED = "not observed"


def host_verdict(metadata: dict[str, Any]) -> str:
    """``stable`` or ``noisy`` from the run's canary, or ``not observed`` (a run made
    before the canary, or one of the original script)."""
    reading = metadata.get("host_stability") or {}
    if not reading.get("canary_reads"):
        return NOT_OBSERVED
    return str(reading.get("verdict") or NOT_OBSERVED)


def host_label(result: RunResult) -> str | None:
    """One line for a run whose canary says the host was noisy (its reasons and the likely
    cause), else None."""
    reading = result.metadata.get("host_stability") or {}
    if host_verdict(result.metadata) != NOISY:
        return None
    cause = likely_cause(reading.get("other_cores_busy") or {})
    reasons = "; ".join(reading.get("reasons") or [])
    return (
        f"noisy host: {reasons}{f'; {cause}' if cause else ''}. Its verdicts and intervals "
        "may not hold on a rerun: rerun on a quiet host"
    )


def host_note(result: RunResult) -> str | None:
    """One line for a run the canary found stable while other cores were busy (the cause
    is there, its effect stayed within the canary's limits, or could not be told from the
    host's own speed because they never idled), else None."""
    reading = result.metadata.get("host_stability") or {}
    if host_verdict(result.metadata) != STABLE:
        return None
    cause = likely_cause(reading.get("other_cores_busy") or {})
    if not cause:
        return None
    contrast = reading.get("neighbour") or {}
    effect = contrast.get("effect")
    if effect is not None:
        seen = (
            f"the canary read {100 * effect:+.1f} % while they were busy against while they "
            f"idled ({contrast.get('busy_reads')} and {contrast.get('idle_reads')} block "
            "halves), within the limit"
        )
    elif busy_throughout(reading):
        seen = _always_busy(reading.get("host_reference") or {})
    else:
        seen = "its effect on the canary stayed within the limits"
    return f"stable host by the canary, though {cause}; {seen} (docs/method.md)"


def _always_busy(reference: dict[str, Any]) -> str:
    """What the canary could say of other cores busy the whole run: against this host's
    stored quiet reference where it had one, else that it cannot tell."""
    if reference.get("over") is not None:
        return (
            "they were busy the whole run, so nothing inside it could be contrasted; against "
            f"this host's quiet reference ({reference.get('runs')} stable runs) the canary "
            f"over the core's pace read {100 * reference['over']:+.1f} %, within the limit"
        )
    runs = reference.get("runs") or 0
    return (
        "they were busy the whole run, so the canary cannot tell their effect from the "
        f"host's own speed, and this host has no quiet reference yet ({runs} of the "
        f"{REFERENCE_MIN_RUNS} recent stable runs it needs): compare with a run while they "
        "idle"
    )


def busy_label(result: RunResult) -> str | None:
    """The label of a run measured on a busy core or busy I/O with --allow-busy, or on a
    host the canary found noisy; else None."""
    labels = [*guard_labels(result.metadata), host_label(result)]
    return "; ".join(label for label in labels if label) or None


def guard_labels(metadata: dict[str, Any]) -> list[str | None]:
    """The busy-core and busy-I/O guards' labels of a run measured with --allow-busy
    (None for a guard that found its resource quiet)."""
    return [metadata.get(key) for key in ("busy_core", "busy_io")]
