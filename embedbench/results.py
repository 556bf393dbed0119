"""The output directory: four JSON files, written atomically as the run goes.

- ``metadata.json``: one object (the run's provenance and parameters);
- ``micro-raw.json``: a list of block records (``timing.BlockRecord``);
- ``validation.json``: a list of per case and length validation rows;
- ``summary.json``: a list of per case and length summary rows.

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

from embedbench import schema
from embedbench.compat import upgrade_original
from embedbench.errors import OutputDirError

SCHEMA_VERSION = schema.SCHEMA_VERSION
METADATA = "metadata.json"
RAW = "micro-raw.json"
VALIDATION = "validation.json"
SUMMARY = "summary.json"
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
    existing = [name for name in RESULT_FILES if (directory / name).exists()]
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
    """Keeps the run's results in memory and rewrites each file atomically on change."""

    def __init__(self, directory: Path, metadata: dict[str, Any]) -> None:
        self.directory = directory
        self.metadata = {"schema_version": SCHEMA_VERSION, **metadata}
        self.records: list[dict[str, Any]] = []
        self.validation: list[dict[str, Any]] = []
        self.summary: list[dict[str, Any]] = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputDirError(f"cannot create output dir {directory} ({exc.strerror})") from None
        for name, data in self._files().items():
            write_json_atomic(directory / name, data)

    def _files(self) -> dict[str, Any]:
        return {
            METADATA: self.metadata,
            RAW: self.records,
            VALIDATION: self.validation,
            SUMMARY: self.summary,
        }

    def update_metadata(self, **fields: Any) -> None:
        """Merge fields into metadata.json."""
        self.metadata.update(fields)
        write_json_atomic(self.directory / METADATA, self.metadata)

    def add_records(self, records: list[dict[str, Any]]) -> None:
        """Append raw block records to micro-raw.json."""
        self.records.extend(records)
        write_json_atomic(self.directory / RAW, self.records)

    def add_validation(self, row: dict[str, Any]) -> None:
        """Append one validation row."""
        self.validation.append(row)
        write_json_atomic(self.directory / VALIDATION, self.validation)

    def replace_validation(self, case: str, tokens: int, row: dict[str, Any]) -> None:
        """Replace the validation row of one case and length (another worker's verdict)."""
        self.validation = [
            row if (r["case"], r["tokens"]) == (case, tokens) else r for r in self.validation
        ]
        write_json_atomic(self.directory / VALIDATION, self.validation)

    def add_summary(self, row: dict[str, Any]) -> None:
        """Append one summary row."""
        self.summary.append(row)
        write_json_atomic(self.directory / SUMMARY, self.summary)


@dataclass
class RunResult:
    """A run's output directory, in memory."""

    directory: Path
    metadata: dict[str, Any]
    records: list[dict[str, Any]] = field(repr=False)
    validation: list[dict[str, Any]]
    summary: list[dict[str, Any]]

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


def _read_files(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise OutputDirError(f"results dir {path} does not exist; pass a run's --output-dir")
    return {name: _read_json(path / name) for name in RESULT_FILES}


def _check_format(path: Path, data: dict[str, Any]) -> str:
    fmt = schema.detect_format(data[METADATA])
    for name in RESULT_FILES:
        problem = schema.first_problem(name, data[name], fmt)
        if problem is not None:
            raise OutputDirError(f"{path}/{problem}")
    return fmt


def check_results_dir(directory: str | Path) -> str:
    """Check the four files against their schema; return the format or raise one line."""
    path = Path(directory)
    return _check_format(path, _read_files(path))


def load_results(directory: str | Path) -> RunResult:
    """Read an output directory written by ``run`` or by the original PR script."""
    path = Path(directory)
    data = _read_files(path)
    parts = (data[METADATA], data[RAW], data[VALIDATION], data[SUMMARY])
    if _check_format(path, data) == schema.ORIGINAL_FORMAT:
        parts = upgrade_original(*parts)
    metadata, records, validation, summary = parts
    return RunResult(path, metadata, records, validation, summary)


def latest_results_dir(root: str | Path) -> Path:
    """The most recently started run under ``root`` (a dir of output dirs)."""
    base = Path(root)
    runs = sorted(p.parent for p in base.glob(f"*/{METADATA}")) if base.is_dir() else []
    if not runs:
        raise OutputDirError(f"no results under {base}; run embedbench first or pass results_dir")
    return max(runs, key=lambda p: (p / METADATA).stat().st_mtime)
