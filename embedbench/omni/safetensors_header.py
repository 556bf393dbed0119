"""The safetensors header, read once and checked: the one parser of it.

A safetensors file starts with an 8-byte little-endian header length, then a JSON
object mapping each tensor name to its dtype, shape and data offsets (relative to the
end of the header). Only the header is read here, never tensor data. No torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_HEADER_BYTES",
    "METADATA_KEY",
    "header_entry",
    "read_header",
]

MAX_HEADER_BYTES = 100 * 2**20
METADATA_KEY = "__metadata__"


def read_header(fd: int, *, check_ranges: bool = True) -> dict[str, dict[str, Any]]:
    """Tensor name -> {dtype, shape, data_offsets (as written), range (absolute bytes)}.

    Checks what a reader relies on (a sane length, a JSON object and, with
    ``check_ranges``, every data range inside the file) and raises ValueError otherwise.
    """
    size = os.fstat(fd).st_size
    if size < 8:
        raise ValueError(f"{size} bytes, too short for a header")
    header_len = int.from_bytes(os.pread(fd, 8, 0), "little")
    if header_len > min(size - 8, MAX_HEADER_BYTES):
        raise ValueError(f"header length {header_len} does not fit a {size}-byte file")
    header = json.loads(os.pread(fd, header_len, 8))
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    tensors = {}
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        begin, end = (8 + header_len + int(n) for n in entry["data_offsets"])
        if check_ranges and not begin <= end <= size:
            raise ValueError(f"{name}'s data lies past the end of the file (truncated?)")
        tensors[name] = {
            "dtype": entry["dtype"],
            "shape": entry["shape"],
            "data_offsets": entry["data_offsets"],
            "range": (begin, end),
        }
    return tensors


def header_entry(path: str | Path, key: str) -> dict[str, Any]:
    """``key``'s entry as the file writes it (dtype, shape, data_offsets).

    Reads the header only and accepts a file whose data was cut off: the entry is
    what the header says, whatever follows it.
    """
    path = Path(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        tensors = read_header(fd, check_ranges=False)
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None
    finally:
        os.close(fd)
    if key not in tensors:
        raise ValueError(f"{path.name} has no tensor {key} in its header")
    return {k: tensors[key][k] for k in ("dtype", "shape", "data_offsets")}
