"""Instructions and simulated cache misses per call, from valgrind's callgrind
(docs/format.md, "work.json"; docs/method.md, "Instructions and cache misses").

Three things, nothing else: the valgrind command the counting process runs under
(``valgrind_command``), the reading of callgrind's output files (``parse_dump``,
``read_dumps``) and the per-call figures of a dump's event totals (``per_call``,
``steady_call``). The counting process itself is ``embedbench.counting``; the parent
that starts it, ``embedbench.harness.countrun``. No torch here.

Every form is counted from ``CALLS_PER_COUNT`` calls, each collected into a dump of its
own (``collected_calls``), after ``WARMUP_CALLS`` instrumented calls that are not
collected; its figures are those of its call with the fewest instructions
(``steady_call``). Callgrind
simulates a fixed cache (``CACHE``), not the host's, so the same code counts the same
misses on any host (up to where the allocator places its buffers). The estimate of
cycles weighs each miss as cachegrind's documentation does: ``L1_MISS_CYCLES`` for a
first-level miss (instruction or data), ``LL_MISS_CYCLES`` for a last-level one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from embedbench.errors import MissingDependencyError

__all__ = [
    "CACHE",
    "CALLS_PER_COUNT",
    "EVENTS",
    "FIGURES",
    "INSTALL_VALGRIND",
    "L1_MISS_CYCLES",
    "LL_MISS_CYCLES",
    "NOT_COUNTED",
    "OUT_PREFIX",
    "WARMUP_CALLS",
    "Dump",
    "collected_calls",
    "find_valgrind",
    "parse_dump",
    "per_call",
    "read_dumps",
    "require_valgrind",
    "steady_call",
    "valgrind_command",
    "valgrind_version",
]

# Calls collected per form, each in a dump of its own, the forms taking turns; a form's
# figures are its median call's. Once warm, a call counts exactly what the one before it
# did, but about one in five carries a one-off (the interpreter retrying a
# specialisation, a new allocator arena) of 0.1 to 1.5 % more: the median of five
# leaves it out, where a mean would not. Six cases of two forms still count in about a
# minute under callgrind's 50 to 100-fold slowdown.
CALLS_PER_COUNT = 5
# Instrumented calls of each form before a case is counted, taking turns, not collected:
# they fill the simulated caches and run what a form does once (allocator growth, lazy
# initialisation, the interpreter's specialisation of the code both forms share).
WARMUP_CALLS = 8
# Cachegrind's weights for a rough cycle estimate: a first-level miss costs about 10
# cycles, a last-level miss about 100 (its documentation, "Cache and branch simulation").
L1_MISS_CYCLES = 10
LL_MISS_CYCLES = 100
# The callgrind events read from a dump's totals.
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
# The per-call figures added to each work.json row (null where not counted).
FIGURES = ("instructions", "d1_misses", "ll_misses", "est_cycles")
NOT_COUNTED: Mapping[str, None] = {name: None for name in FIGURES}
# The simulated caches, (bytes, ways, line bytes): fixed, so that the misses do not
# depend on the host valgrind runs on. A common desktop and server core's first levels,
# and a 32 MiB last level (the default checkpoint's table, 1.09 GB, is far beyond it).
CACHE: Mapping[str, tuple[int, int, int]] = {
    "I1": (32768, 8, 64),
    "D1": (32768, 8, 64),
    "LL": (33554432, 16, 64),
}
# Callgrind's output files: OUT_PREFIX.<pid> and, for the n-th dump, OUT_PREFIX.<pid>.<n>.
OUT_PREFIX = "callgrind.out"
INSTALL_VALGRIND = "apt-get install valgrind"


def find_valgrind() -> str | None:
    """The valgrind executable on PATH, or None."""
    return shutil.which("valgrind")


def require_valgrind() -> str:
    """The valgrind executable; ``MissingDependencyError`` (one line, how to install it)
    where there is none."""
    found = find_valgrind()
    if found is None:
        raise MissingDependencyError(
            "counts (--counts) are taken under valgrind, which is not installed here (not "
            f"on PATH); install it ({INSTALL_VALGRIND}, or your system's package), or run "
            "without counts"
        )
    return found


def valgrind_version(valgrind: str) -> str:
    """``valgrind --version`` (``valgrind-3.19.0``), or ``unknown`` where it does not say."""
    try:
        done = subprocess.run(
            [valgrind, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def valgrind_command(
    valgrind: str, argv: Sequence[str], out_dir: Path, *, instrument_at_start: bool
) -> list[str]:
    """valgrind running ``argv`` under callgrind: collection off until the counted code
    turns it on, cache simulation of ``CACHE``, one file per dump in ``out_dir``.

    ``instrument_at_start`` False leaves instrumentation off too (the interpreter and torch
    load about ten times faster) until the counting process starts it itself.
    """
    caches = [f"--{level}={','.join(map(str, CACHE[level]))}" for level in ("I1", "D1", "LL")]
    return [
        valgrind,
        "--tool=callgrind",
        "--quiet",
        f"--instr-atstart={'yes' if instrument_at_start else 'no'}",
        "--collect-atstart=no",
        "--cache-sim=yes",
        *caches,
        f"--callgrind-out-file={out_dir / OUT_PREFIX}.%p",
        *argv,
    ]


@dataclass(frozen=True)
class Dump:
    """One callgrind output file: its ``part`` (the n-th dump; 0 for none) and the total
    of each event."""

    part: int
    totals: dict[str, int]


_HEADER = re.compile(r"^(events|summary|totals|part):\s*(.*)$")


def parse_dump(text: str) -> Dump:
    """The ``part`` and the event totals of one callgrind output file: the ``summary:``
    line (``totals:`` where there is none) read against the ``events:`` header.
    ``ValueError`` when either is missing or they do not match."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2).strip()
    if "events" not in fields:
        raise ValueError("no 'events:' line: not a callgrind output file")
    names = fields["events"].split()
    line = fields.get("summary", fields.get("totals"))
    if line is None:
        raise ValueError("no 'summary:' or 'totals:' line: the dump was cut short")
    values = line.split()
    if len(values) > len(names) or not all(v.isdigit() for v in values):
        raise ValueError(f"the totals {line!r} do not match the events {fields['events']!r}")
    totals = {name: int(values[i]) if i < len(values) else 0 for i, name in enumerate(names)}
    part = fields.get("part", "0")
    return Dump(int(part) if part.isdigit() else 0, totals)


def read_dumps(out_dir: Path, pid: int) -> dict[int, Dump]:
    """Every numbered dump of process ``pid`` in ``out_dir``, by part (the file written
    at exit, without a number, is left out)."""
    dumps = {}
    for path in out_dir.glob(f"{OUT_PREFIX}.{pid}.*"):
        suffix = path.name.rsplit(".", 1)[1]
        if suffix.isdigit():
            dump = parse_dump(path.read_text(encoding="utf-8", errors="replace"))
            dumps[int(suffix)] = dump
    return dict(sorted(dumps.items()))


def per_call(totals: Mapping[str, int], calls: int) -> dict[str, int]:
    """The per-call figures of ``calls`` calls' ``totals``, each rounded to an integer:
    ``instructions`` (Ir), ``d1_misses`` (D1mr + D1mw), ``ll_misses`` (DLmr + DLmw) and
    ``est_cycles`` (Ir + L1_MISS_CYCLES × (I1mr + D1mr + D1mw) + LL_MISS_CYCLES × (ILmr +
    DLmr + DLmw)). ``ValueError`` where an event is missing (no cache simulation)."""
    missing = [name for name in EVENTS if name not in totals]
    if missing:
        raise ValueError(f"the dump has no {', '.join(missing)} (was --cache-sim=yes given?)")
    if calls < 1:
        raise ValueError(f"calls must be at least 1, got {calls}")
    t = totals
    l1 = t["I1mr"] + t["D1mr"] + t["D1mw"]
    ll = t["ILmr"] + t["DLmr"] + t["DLmw"]
    figures = {
        "instructions": t["Ir"],
        "d1_misses": t["D1mr"] + t["D1mw"],
        "ll_misses": t["DLmr"] + t["DLmw"],
        "est_cycles": t["Ir"] + L1_MISS_CYCLES * l1 + LL_MISS_CYCLES * ll,
    }
    return {name: _rounded(value, calls) for name, value in figures.items()}


def collected_calls(variants: Sequence[str], calls: int) -> list[str]:
    """The forms of one case's collected calls, in order: ``calls`` rounds, each form once
    per round, in turn (each call dumped apart)."""
    return [variant for _ in range(calls) for variant in variants]


def steady_call(calls: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The figures of the call with the fewest instructions among ``calls`` (the first such
    call where several tie): the form's steady state. Once warm, a call executes what the
    one before it did; a one-off (the interpreter re-specialising, a new allocator arena)
    only adds to a call, and can land in several of the few counted."""
    if not calls:
        raise ValueError("no counted call")
    return dict(min(calls, key=lambda call: call["instructions"]))


def _rounded(total: int, calls: int) -> int:
    """``total / calls`` to the nearest integer (halves up), in integers."""
    return (2 * total + calls) // (2 * calls)
