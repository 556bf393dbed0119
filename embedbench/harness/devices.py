"""Device choice, the explicit sync that brackets every timed call, and device facts."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from embedbench.errors import ConfigError
from embedbench.harness import nvml
from embedbench.harness.sysinfo import cpu_model
from embedbench.harness.timing import Sync, no_sync

__all__ = [
    "HUGE_PAGE_BYTES",
    "SYNC_WARNING",
    "count_device_syncs",
    "describe",
    "device_name",
    "gpu_clock_reader",
    "gpu_facts",
    "memory_placement",
    "resolve_device",
    "start_cuda",
    "sync_for",
]


def resolve_device(requested: str) -> torch.device:
    """``auto`` picks CUDA when available, else the CPU; ``cuda`` without CUDA is refused."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        build = "without CUDA" if torch.version.cuda is None else f"with CUDA {torch.version.cuda}"
        raise ConfigError(
            f"--device cuda, but no CUDA device is usable (torch {torch.__version__} built "
            f"{build}); use --device cpu or auto"
        )
    return torch.device(requested)


def start_cuda(device: torch.device) -> float | None:
    """Create ``device``'s CUDA context now and return the seconds it took (None off CUDA),
    so that a clock started afterwards (the table's load) does not hold it."""
    if device.type != "cuda":
        return None
    started = time.perf_counter()
    torch.empty(1, device=device)  # the first allocation creates the context
    torch.cuda.synchronize(device)
    return time.perf_counter() - started


def sync_for(device: torch.device) -> Sync:
    """``torch.cuda.synchronize`` for a CUDA device, a no-op for the CPU."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()

        def cuda_sync() -> None:
            torch.cuda.synchronize(index)

        return cuda_sync
    return no_sync


# What torch says, through warnings, for each synchronizing CUDA operation while
# torch.cuda.set_sync_debug_mode("warn") is on.
SYNC_WARNING = "called a synchronizing CUDA operation"


def count_device_syncs(call: Callable[[], Any], device: torch.device) -> int | None:
    """How many synchronizing CUDA operations torch reports for one ``call()`` (None off
    CUDA): a lower bound, see ``embedbench.cases.SYNC_LABEL``.

    Boolean-index assignment with a CPU mask blocks in some torch builds and not in
    others, so a run's host latency may or may not include the device's work: the counts
    are recorded so that runs on different builds aren't compared blindly. The caller's
    sync debug mode is restored, even when ``call`` raises.
    """
    if device.type != "cuda":
        return None
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum(SYNC_WARNING in str(w.message) for w in caught)


def device_name(device: torch.device) -> str:
    """A human name for the device that runs the lookups."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model() or "cpu"


def gpu_facts(device: str | torch.device) -> dict[str, Any] | None:
    """Name and compute capability of a CUDA device, or None for other devices."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(dev)
    return {"name": torch.cuda.get_device_name(dev), "capability": f"{major}.{minor}"}


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _uuid(device: torch.device) -> str | None:
    return str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "") or None


def describe(device: torch.device) -> dict[str, Any]:
    """The device part of the provenance record: type, human name, GPU facts; on CUDA
    also torch's device properties and NVML's driver version, UUID and SM clocks."""
    facts: dict[str, Any] = {
        "type": device.type,
        "name": device_name(device),
        "gpu": gpu_facts(device),
    }
    if device.type == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device)
        uuid = _uuid(device)
        facts["properties"] = {
            "total_memory_bytes": int(props.total_memory),
            "multi_processor_count": int(props.multi_processor_count),
            "uuid": uuid,
        }
        facts["nvml"] = nvml.gpu_facts(uuid, _cuda_index(device))
    return facts


def gpu_clock_reader(device: torch.device) -> Callable[[], float | None]:
    """The SM clock reader of a CUDA device (NVML), read at block boundaries; off CUDA,
    or where NVML cannot tell, a reader of None."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return lambda: None
    return nvml.sm_clock_reader(_uuid(device), _cuda_index(device))


HUGE_PAGE_BYTES = 2 * 2**20


def _smaps_huge_kb(address: int) -> int | None:
    """AnonHugePages (kB) of the mapping that holds ``address``, or None if unreadable."""
    inside = False
    try:
        with Path("/proc/self/smaps").open() as handle:
            for line in handle:
                head = line.split(maxsplit=1)[0]
                if "-" in head and not head.endswith(":"):
                    low, _, high = head.partition("-")
                    inside = int(low, 16) <= address < int(high, 16)
                elif inside and head == "AnonHugePages:":
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def memory_placement(table: torch.Tensor) -> dict[str, Any]:
    """Where a CPU tensor landed: its address modulo 2 MiB and the transparent huge pages
    backing its mapping (None for device memory or when /proc cannot tell)."""
    if table.device.type != "cpu":
        return {"address_mod_2mib": None, "anon_huge_kb": None}
    address = table.data_ptr()
    return {"address_mod_2mib": address % HUGE_PAGE_BYTES, "anon_huge_kb": _smaps_huge_kb(address)}
