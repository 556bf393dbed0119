"""This host's quiet memory level, kept between runs (read and written; no statistics).

A neighbour that never pauses (a memory-hungry process on another core for the whole
run) leaves no quiet moment inside a run to contrast with, so only a level kept from
earlier runs can show it. After every complete run the canary called stable, the runner
appends the run's memory level (``stability.memory_level``) here, under a key naming what
makes levels comparable: the CPU model, the measuring core, the device and the canary's
size and source. ``stability.reference_from`` turns the entries into the reference that
the next run is judged against.

The file is small JSON in the cache directory (``$EMBEDBENCH_HOST_REFERENCE`` replaces its
path). Unreadable or malformed, it reads as empty, and a run never fails for it: the
reference is advice on the host, not part of the results. Writes go through a temporary
file and a rename, so a reader never sees half a file; runs on one host are serialised
by the host lock.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FILE_NAME", "KEEP", "REFERENCE_ENV", "append", "host_key", "load", "load_all"]

REFERENCE_ENV = "EMBEDBENCH_HOST_REFERENCE"
FILE_NAME = "host-reference.json"
# Entries kept per key (the newest); more than the reference ever reads.
KEEP = 50


def host_key(cpu_model: str | None, core: int, device: str, canary: Mapping[str, Any]) -> str:
    """What makes two runs' memory levels comparable, as one string."""
    return "|".join(
        [
            cpu_model or "unknown cpu",
            f"core {core}",
            device,
            f"canary {canary.get('rows')} rows {canary.get('bytes')} bytes",
            str(canary.get("source")),
            str(canary.get("pace")),
        ]
    )


def _read(path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: [e for e in v if isinstance(e, dict)] for k, v in data.items() if isinstance(v, list)
    }


def load_all(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every key's entries (``level``, ``time``, ``run``), oldest first; {} where the
    file is missing or unreadable."""
    return _read(path)


def load(path: Path, key: str) -> list[dict[str, Any]]:
    """The entries kept under ``key``, oldest first."""
    return _read(path).get(key, [])


def append(path: Path, key: str, entry: Mapping[str, Any], keep: int = KEEP) -> bool:
    """Add ``entry`` under ``key`` (keeping the newest ``keep``); False, and nothing
    changed, where the file cannot be written."""
    data = _read(path)
    data[key] = [*data.get(key, []), dict(entry)][-keep:]
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=1)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return True
