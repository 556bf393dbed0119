"""An embedbench results directory of an older schema version, read as the current one.

One step per version: ``STEPS[n]`` reads the files of version ``n - 1`` as version ``n``
has them. ``upgrade`` applies, in order, every step above a directory's version, so no
reader detects a version by a missing field. A directory newer than this code is
refused in one line, with or without jsonschema. The original PR script's files carry no
version and are read by ``compat.upgrade_original`` instead. The table of versions and
how to add one: docs/format.md, "Schema versions and the upgrade path".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from embedbench.errors import OutputDirError
from embedbench.harness.callgrind import FIGURES
from embedbench.harness.timing import AA_SCOPE
from embedbench.report.compat import upgrade_duplicated, upgrade_headline, with_timing_window
from embedbench.report.schema import SCHEMA_VERSION

__all__ = ["STEPS", "ResultFiles", "check_version", "split_aa_records", "upgrade"]


@dataclass(frozen=True)
class ResultFiles:
    """The contents of one results directory (``aa_records``: aa-raw.json's; ``work``:
    work.json's)."""

    metadata: dict[str, Any]
    records: list[dict[str, Any]] = field(repr=False)
    validation: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    aa_records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    work: list[dict[str, Any]] = field(default_factory=list, repr=False)


def split_aa_records(
    records: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(A/A records, all others), each in the order given."""
    aa = [r for r in records if r.get("scope") == AA_SCOPE]
    return aa, [r for r in records if r.get("scope") != AA_SCOPE]


def _to_2(files: ResultFiles) -> ResultFiles:
    # Worker fields are new and optional: records without ``worker`` are one process's.
    return files


def _to_3(files: ResultFiles) -> ResultFiles:
    return dataclasses.replace(files, metadata=upgrade_duplicated(files.metadata))


def _to_4(files: ResultFiles) -> ResultFiles:
    return dataclasses.replace(files, summary=upgrade_headline(files.summary))


def _to_5(files: ResultFiles) -> ResultFiles:
    # Before 5, a run could predate both: the recorded timing window (it was then timed in
    # the legacy window) and aa-raw.json (its A/A records sat in micro-raw.json).
    moved, records = split_aa_records(files.records)
    return dataclasses.replace(
        files,
        metadata=with_timing_window(files.metadata),
        records=records,
        aa_records=[*files.aa_records, *moved],
    )


def _to_6(files: ResultFiles) -> ResultFiles:
    # work.json is new: a run made before it counted nothing, and reads with no ledger.
    return dataclasses.replace(files, work=[])


def _to_7(files: ResultFiles) -> ResultFiles:
    # Instructions and simulated misses per call are new: a row made before them was not
    # counted under valgrind, and reads with the four null.
    work = [{**dict.fromkeys(FIGURES), **row} for row in files.work]
    return dataclasses.replace(files, work=work)


STEPS: dict[int, Callable[[ResultFiles], ResultFiles]] = {
    2: _to_2,
    3: _to_3,
    4: _to_4,
    5: _to_5,
    6: _to_6,
    7: _to_7,
}


def check_version(version: Any, where: str) -> int:
    """``version`` as an int this code reads, or a one-line OutputDirError naming ``where``."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise OutputDirError(
            f"{where}: schema_version {version!r} is not a version (a positive integer)"
        )
    if version > SCHEMA_VERSION:
        raise OutputDirError(
            f"{where}: schema_version {version} was written by a newer embedbench (this one "
            f"reads up to {SCHEMA_VERSION}): upgrade embedbench to read it"
        )
    return version


def upgrade(files: ResultFiles, version: int) -> ResultFiles:
    """``files`` of schema ``version`` as the current version has them (every later step,
    in order)."""
    for step in range(version + 1, SCHEMA_VERSION + 1):
        files = STEPS[step](files)
    return files
