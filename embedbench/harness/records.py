"""One field of a raw block record, whichever form it comes in (pure, no I/O).

Records reach the statistics and the host reading either as ``BlockRecord`` objects
(in the worker, in ``paired_benchmark``) or as their JSON (from ``micro-raw.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["field_of"]


def field_of(record: Any, name: str, default: Any = None) -> Any:
    """``record[name]`` of a JSON record, or ``record.name`` of an object; ``default``
    where it has none."""
    if isinstance(record, Mapping):
        return record.get(name, default)
    return getattr(record, name, default)
