"""What to read with care before a run's numbers: an unfinished run's status, failed
validations, a busy core or busy I/O, a noisy host; as lines (the CLI and the PR comment
print ``status_lines``) and as the banner at the top of the report (``banner_html``, in
``sections.status``).
"""

from __future__ import annotations

import html

from embedbench.cases import CASE_LABELS
from embedbench.report.hostprose import guard_labels, host_label, host_note
from embedbench.report.results import RunResult

__all__ = [
    "banner_html",
    "failed_validations",
    "status_lines",
]


def failed_validations(result: RunResult) -> list[str]:
    """One line per failed validation, for the banner at the top of a report."""
    return [
        f"{CASE_LABELS.get(r['case'], r['case'])} @ {r['tokens']} tokens: {r.get('mismatch')}"
        for r in result.validation
        if not r.get("ok")
    ]


def status_lines(result: RunResult) -> list[str]:
    """What to know before reading an unfinished run's numbers (none for a complete run):
    its status and, for a partial run of the original script, the files it lacks."""
    if result.status == "complete":
        return []
    lines = [f"run status: {result.status}: partial results (cases not measured show as such)"]
    note = result.metadata.get("partial_note")
    return [*lines, note] if note else lines


def banner_html(result: RunResult) -> str:
    """A red banner for failed validations, an unfinished run, a busy core or a noisy host."""
    problems = [*status_lines(result), *failed_validations(result)]
    busy = "; ".join(label for label in guard_labels(result.metadata) if label)
    if busy:
        problems.append(f"{busy}: the numbers may carry other work's noise")
    if host_label(result):
        problems.append(host_label(result))
    if not problems:
        note = host_note(result)
        aside = f'<div style="color:#6e5600">Note: {html.escape(note)}.</div>' if note else ""
        return (
            '<div style="color:#1a7f37">All validations passed: lookup counts as expected, '
            "torch.equal true.</div>" + aside
        )
    items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return (
        '<div style="background:#d1242f;color:white;padding:8px 12px;border-radius:4px">'
        f"<b>Read with care: validation failed, run incomplete, core busy or host noisy</b>"
        f"<ul>{items}</ul></div>"
    )
