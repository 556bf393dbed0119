"""The paired design: how many blocks, spread over how many worker processes.

Every worker runs as many baseline-first as fixed-first blocks, so ``blocks`` is even and
at least twice ``processes``. A value left unset adapts to the one given instead of
refusing it: ``processes`` becomes the most the blocks allow, up to the default
(``min(5, blocks // 2)``), and ``blocks`` the fewest the processes need, from the default
up (``max(20, 2 * processes)``). Two given values that clash are refused with one line
saying what to pass. Torch-free: the CLI checks a design before anything heavy loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from embedbench.errors import ConfigError

__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_PROCESSES",
    "DERIVED",
    "GIVEN",
    "Design",
    "cli_spelling",
    "keyword_spelling",
    "resolve_design",
]

# Worker processes per run: chosen from the between-run measurements in
# docs/archive/PERFORMANCE-2026-11.md, "Why 5 workers": the fewest whose interval
# predicts a rerun on the CI machine.
DEFAULT_PROCESSES = 5
DEFAULT_BLOCKS = 20
GIVEN = "given"
DERIVED = "derived"

# How a message spells a parameter: ``--blocks 6`` (CLI) or ``blocks=6`` (Python).
Spelling = Callable[[str, int], str]


def cli_spelling(name: str, value: int) -> str:
    """``--blocks 6``."""
    return f"--{name} {value}"


def keyword_spelling(name: str, value: int) -> str:
    """``blocks=6``."""
    return f"{name}={value}"


@dataclass(frozen=True)
class Design:
    """A checked design and where each of its two numbers came from (GIVEN or DERIVED)."""

    blocks: int
    processes: int
    blocks_source: str = GIVEN
    processes_source: str = GIVEN

    def notes(self, spell: Spelling = cli_spelling) -> list[str]:
        """One line per derived value that differs from its default, saying why (the
        run's first line); none when the defaults stand."""
        lines = []
        if self.processes_source == DERIVED and self.processes < DEFAULT_PROCESSES:
            workers = _workers(self.processes)
            alone = " (the within-process interval)" if self.processes == 1 else ""
            lines.append(
                f"{workers}{alone}, not {DEFAULT_PROCESSES}: {spell('blocks', self.blocks)} "
                f"allows at most {self.processes}, one block in each order per worker; "
                f"{spell('blocks', 2 * DEFAULT_PROCESSES)} or more runs {DEFAULT_PROCESSES}"
            )
        if self.blocks_source == DERIVED and self.blocks > DEFAULT_BLOCKS:
            lines.append(
                f"{self.blocks} blocks, not {DEFAULT_BLOCKS}: "
                f"{spell('processes', self.processes)} needs at least {self.blocks}, one "
                "block in each order per worker"
            )
        return lines


def _workers(count: int) -> str:
    return f"{count} worker process" + ("" if count == 1 else "es")


def resolve_design(blocks: int | None, processes: int | None) -> Design:
    """The design for ``blocks`` and ``processes`` (None: unset, derived from the other);
    ConfigError, one line saying what to pass, when the given values cannot work."""
    if blocks is None:
        wanted = DEFAULT_BLOCKS if processes is None else max(DEFAULT_BLOCKS, 2 * processes)
        blocks_source = DERIVED
    else:
        _check_even(blocks, processes)
        wanted, blocks_source = blocks, GIVEN
    if processes is None:
        return Design(wanted, min(DEFAULT_PROCESSES, wanted // 2), blocks_source, DERIVED)
    pairs = wanted // 2
    if processes > pairs:
        raise ConfigError(
            f"processes ({processes}) must be at most blocks / 2 ({pairs}), so that "
            f"every worker runs a block in each order; pass --processes {pairs} "
            f"(notebook: processes={pairs}) or --blocks {2 * processes}"
        )
    return Design(wanted, processes, blocks_source, GIVEN)


def _check_even(blocks: int, processes: int | None) -> None:
    """An odd block count is refused with the even neighbours the processes allow (or
    the fewest blocks they need), so that following the advice is one step."""
    if blocks % 2 == 0:
        return
    fewest = 2 if processes is None else 2 * processes
    choices = [b for b in (blocks - 1, blocks + 1) if b >= fewest] or [fewest]
    needs = ""
    if processes is not None and blocks - 1 < fewest:
        needs = f" (--processes {processes} needs at least {fewest})"
    raise ConfigError(
        f"blocks must be even, so that half the blocks run the baseline first, got "
        f"{blocks}; use {' or '.join(map(str, choices))}{needs}"
    )
