"""The output directory: five JSON files (six with the A/A check), written atomically.

- ``metadata.json``: one object (the run's provenance and parameters);
- ``micro-raw.json``: a list of block records (``timing.BlockRecord``): the timer floor
  and the A/B comparison, exactly what the original script's file holds;
- ``aa-raw.json`` (A/A check only): the A/A block records, in the same shape, kept out
  of ``micro-raw.json`` so that a reader of the original format that does not filter on
  ``scope`` never mixes them into the comparison;
- ``validation.json``: a list of per case and length validation rows;
- ``summary.json``: a list of per case and length summary rows;
- ``work.json``: a list of per case, length and variant ledgers of one call's counted
  work (operators, bytes, syncs, kernels: ``harness.ledger``), from schema 6 on; an older
  directory has none and reads with an empty ``work``.

Every write goes to a temporary file in the same directory and is renamed over
the target, so a reader (or an interrupted run) never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.errors import OutputDirError
from embedbench.report import schema
from embedbench.report.compat import upgrade_original, upgrade_records
from embedbench.report.upgrades import ResultFiles, check_version, split_aa_records, upgrade

__all__ = [
    "AA_RAW",
    "METADATA",
    "RAW",
    "RESULT_FILES",
    "SCHEMA_VERSION",
    "SUMMARY",
    "VALIDATION",
    "WORK",
    "DirCheck",
    "ResultsWriter",
    "RunResult",
    "check_output_dir",
    "inspect_results_dir",
    "latest_results_dir",
    "load_results",
    "write_json_atomic",
    "write_text_atomic",
]

SCHEMA_VERSION = schema.SCHEMA_VERSION
METADATA = "metadata.json"
RAW = "micro-raw.json"
VALIDATION = "validation.json"
SUMMARY = "summary.json"
AA_RAW = schema.AA_RAW
WORK = schema.WORK
# The four files the original script writes too; a run also writes WORK (and AA_RAW).
RESULT_FILES = (METADATA, RAW, VALIDATION, SUMMARY)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same dir and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())  # mkstemp's 0600 would hide results
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (nothing is written if it fails).

    A failed write (disk full, permissions) leaves the previous file as it was and
    raises a one-line OutputDirError.
    """
    text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
    try:
        write_text_atomic(path, text + "\n")
    except OSError as exc:
        raise OutputDirError(
            f"cannot write {path} ({exc.strerror or exc}); the previous file is unchanged; "
            "free space or choose another --output-dir"
        ) from None


def check_output_dir(directory: Path, *, overwrite: bool) -> None:
    """Refuse a directory that cannot take results, without touching anything."""
    if directory.exists() and not directory.is_dir():
        raise OutputDirError(f"output dir {directory} is a file; pass a directory path")
    existing = [name for name in (*RESULT_FILES, WORK, AA_RAW) if (directory / name).exists()]
    if existing and not overwrite:
        raise OutputDirError(
            f"output dir {directory} already holds results ({existing[0]}); "
            "pass --overwrite (notebook: overwrite=True) or choose another --output-dir"
        )
    parent = directory if directory.exists() else _existing_parent(directory)
    try:  # a real probe: os.access says yes to root even on a read-only file system
        tempfile.TemporaryDirectory(prefix=".embedbench-probe-", dir=parent).cleanup()
    except OSError as exc:
        raise OutputDirError(
            f"output dir {directory} is not writable ({exc.strerror}); choose another --output-dir"
        ) from None


def _existing_parent(path: Path) -> Path:
    for candidate in path.parents:
        if candidate.exists():
            return candidate
    return Path("/")


class ResultsWriter:
    """Keeps the run's results in memory and rewrites each file atomically on change.

    With ``aa_check`` it writes ``aa-raw.json`` too (empty until the first A/A records);
    without, it removes one left by an earlier run in the same directory (``--overwrite``),
    so no stale A/A records are read with the new ones. With ``directory`` None it keeps
    them in memory only (a simulated run, ``embedbench.sim``).
    """

    def __init__(
        self, directory: Path | None, metadata: dict[str, Any], *, aa_check: bool = False
    ) -> None:
        self.directory = directory
        self.aa_check = aa_check
        self.metadata = {"schema_version": SCHEMA_VERSION, **metadata}
        self.records: list[dict[str, Any]] = []
        self.aa_records: list[dict[str, Any]] = []
        self.validation: list[dict[str, Any]] = []
        self.summary: list[dict[str, Any]] = []
        self.work: list[dict[str, Any]] = []
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if not aa_check:
                (directory / AA_RAW).unlink(missing_ok=True)
        except OSError as exc:
            raise OutputDirError(
                f"cannot prepare output dir {directory} ({exc.strerror})"
            ) from None
        for name, data in self._files(aa_check).items():
            write_json_atomic(directory / name, data)

    def _write(self, name: str, data: Any) -> None:
        if self.directory is not None:
            write_json_atomic(self.directory / name, data)

    def _files(self, aa_check: bool) -> dict[str, Any]:
        files = {
            METADATA: self.metadata,
            RAW: self.records,
            VALIDATION: self.validation,
            SUMMARY: self.summary,
            WORK: self.work,
        }
        return {**files, AA_RAW: self.aa_records} if aa_check else files

    def schema_check(self) -> str:
        """One line: the files as they are now, checked against their schema (or why
        not: see ``schema.check_line``)."""
        return schema.check_line(self._files(self.aa_check))

    def update_metadata(self, **fields: Any) -> None:
        """Merge fields into metadata.json."""
        self.metadata.update(fields)
        self._write(METADATA, self.metadata)

    def add_records(self, records: list[dict[str, Any]]) -> None:
        """Append raw block records: A/A records to aa-raw.json, the rest to micro-raw.json."""
        aa, micro = split_aa_records(records)
        if micro:
            self.records.extend(micro)
            self._write(RAW, self.records)
        if aa:
            self.aa_records.extend(aa)
            self._write(AA_RAW, self.aa_records)

    def add_validation(self, row: dict[str, Any]) -> None:
        """Append one validation row."""
        self.validation.append(row)
        self._write(VALIDATION, self.validation)

    def replace_validation(self, case: str, tokens: int, row: dict[str, Any]) -> None:
        """Replace the validation row of one case and length (another worker's verdict)."""
        self.validation = [
            row if (r["case"], r["tokens"]) == (case, tokens) else r for r in self.validation
        ]
        self._write(VALIDATION, self.validation)

    def add_summary(self, row: dict[str, Any]) -> None:
        """Append one summary row."""
        self.summary.append(row)
        self._write(SUMMARY, self.summary)

    def set_work(self, case: str, tokens: int, rows: list[dict[str, Any]]) -> None:
        """Put the ledger rows of one case and length in work.json: in place of its
        earlier rows (another worker's arrived), else after the others."""
        key = (case, tokens)
        at = next((i for i, r in enumerate(self.work) if (r["case"], r["tokens"]) == key), None)
        others = [r for r in self.work if (r["case"], r["tokens"]) != key]
        at = len(others) if at is None else at
        self.work = [*others[:at], *rows, *others[at:]]
        self._write(WORK, self.work)


@dataclass
class RunResult:
    """A run's output directory, in memory (``records``: micro-raw.json's; ``aa_records``:
    the A/A check's, from aa-raw.json; ``work``: work.json's ledger rows, empty for a
    run made before it; ``directory`` None for a simulated run)."""

    directory: Path | None
    metadata: dict[str, Any]
    records: list[dict[str, Any]] = field(repr=False)
    validation: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    aa_records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    work: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def status(self) -> str:
        """``complete``, ``interrupted``, ``failed`` or ``running``."""
        return str(self.metadata.get("status", "unknown"))

    @property
    def all_valid(self) -> bool:
        """True when every validation passed and every case was measured."""
        return all(row.get("ok", False) for row in self.validation) and all(
            row.get("valid", False) for row in self.summary
        )

    def summary_row(self, case: str, tokens: int) -> dict[str, Any] | None:
        """The summary row of one case and length, if measured."""
        for row in self.summary:
            if row["case"] == case and row["tokens"] == tokens:
                return row
        return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OutputDirError(f"results dir {path.parent} has no {path.name}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OutputDirError(f"{path} is not valid JSON ({exc}); was it truncated?") from None


def _read_files(path: Path) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The files that are there, and which of the original four are not.

    Every file is required, except in the original's format, which writes metadata.json
    and summary.json only when it finishes: with micro-raw.json there, a directory that
    lacks others is its partial run (metadata.json missing: the original's, as an
    embedbench run writes it first).
    """
    if not path.is_dir():
        raise OutputDirError(f"results dir {path} does not exist; pass a run's --output-dir")
    present = [name for name in (*RESULT_FILES, AA_RAW, WORK) if (path / name).exists()]
    data = {METADATA: _read_json(path / METADATA)} if METADATA in present else {}
    missing = tuple(name for name in RESULT_FILES if name not in present)
    original = schema.detect_format(data.get(METADATA)) == schema.ORIGINAL_FORMAT
    if missing and not (original and RAW in present):
        raise OutputDirError(f"results dir {path} has no {missing[0]}")
    data.update({name: _read_json(path / name) for name in present if name != METADATA})
    return data, missing


def _check_format(path: Path, data: dict[str, Any], *, required: bool = True) -> str:
    """The format; each file checked against its schema (skipped where jsonschema is
    missing, unless ``required``), or a one-line OutputDirError for the first bad field."""
    fmt = schema.detect_format(data.get(METADATA))
    if not required and not schema.available():
        return fmt
    for name, content in data.items():
        problem = schema.first_problem(name, content, fmt)
        if problem is not None:
            raise OutputDirError(f"{path}/{problem}")
    return fmt


@dataclass(frozen=True)
class DirCheck:
    """What ``inspect_results_dir`` found: the format, the files it checked and, for a
    partial run of the original script, the files it never wrote."""

    format: str
    files: tuple[str, ...]
    missing: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: the format, a partial run's missing files, the files checked."""
        partial = f", partial run without {', '.join(self.missing)}" if self.missing else ""
        return f"{self.format} format{partial}: {', '.join(self.files)}"


def inspect_results_dir(directory: str | Path) -> DirCheck:
    """Check the files (aa-raw.json too, when there) against their schema, or raise one line
    (``MissingDependencyError`` without jsonschema)."""
    path = Path(directory)
    data, missing = _read_files(path)
    if schema.detect_format(data.get(METADATA)) != schema.ORIGINAL_FORMAT:
        check_version(data[METADATA].get("schema_version"), f"{path}/{METADATA}")
    return DirCheck(_check_format(path, data), tuple(data), missing)


def load_results(directory: str | Path) -> RunResult:
    """Read an output directory written by ``run`` or by the original PR script (also
    its partial run: see ``compat``). The schema check is skipped without jsonschema; a
    directory newer than this code is refused in one line either way.

    An older embedbench directory is read as the current schema version has it
    (``upgrades``): for instance, one written before aa-raw.json existed has its A/A
    records moved out of micro-raw.json, so ``records`` is always what the original's
    micro-raw.json would hold.
    """
    path = Path(directory)
    data, missing = _read_files(path)
    if schema.detect_format(data.get(METADATA)) != schema.ORIGINAL_FORMAT:
        version = check_version(data[METADATA].get("schema_version"), f"{path}/{METADATA}")
    fmt = _check_format(path, data, required=False)
    if fmt == schema.ORIGINAL_FORMAT:
        moved, records = split_aa_records(data[RAW])
        aa_records = upgrade_records([*data.get(AA_RAW, []), *moved])
        metadata, records, validation, summary = upgrade_original(
            data.get(METADATA),
            records,
            data.get(VALIDATION),
            data.get(SUMMARY),
            missing=missing,
            aa_records=aa_records,
        )
        return RunResult(path, metadata, records, validation, summary, aa_records)
    files = ResultFiles(
        data[METADATA],
        data[RAW],
        data[VALIDATION],
        data[SUMMARY],
        data.get(AA_RAW, []),
        data.get(WORK, []),
    )
    files = upgrade(files, version)
    return RunResult(
        path,
        files.metadata,
        files.records,
        files.validation,
        files.summary,
        files.aa_records,
        files.work,
    )


def latest_results_dir(root: str | Path) -> Path:
    """The most recently started run under ``root`` (a dir of output dirs)."""
    base = Path(root)
    runs = sorted(p.parent for p in base.glob(f"*/{METADATA}")) if base.is_dir() else []
    if not runs:
        raise OutputDirError(f"no results under {base}; run embedbench first or pass results_dir")
    return max(runs, key=lambda p: (p / METADATA).stat().st_mtime)
