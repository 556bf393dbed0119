"""GPU facts and the SM clock through NVML (``libnvidia-ml.so.1``), by ctypes.

No dependency: the NVIDIA driver ships the library wherever a CUDA GPU works. Where it
is missing or a call fails, the facts say ``"unavailable"`` with the reason and the clock
reader returns None; nothing here ever stops a run. The SM clock is read at block
boundaries, next to the CPU frequency, so a GPU that dropped to idle clocks during a gap
(345 MHz was seen on an H200 between cases) shows in the records.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

__all__ = [
    "LIBRARY",
    "NVML_CLOCK_SM",
    "NVML_SUCCESS",
    "NvmlError",
    "gpu_facts",
    "load_library",
    "sm_clock_reader",
]

LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0
NVML_CLOCK_SM = 1
_BUFFER = 96  # NVML's UUID and driver-version buffers are at most 80 and 96 bytes


class NvmlError(RuntimeError):
    """An NVML call that did not return NVML_SUCCESS (or a library that is not there)."""


def load_library() -> Any:
    """The NVML library, or NvmlError where this machine has none."""
    try:
        return ctypes.CDLL(LIBRARY)
    except OSError as exc:
        raise NvmlError(f"{LIBRARY} not loadable ({exc})") from None


def _check(lib: Any, name: str, *args: Any) -> None:
    status = getattr(lib, name)(*args)
    if status != NVML_SUCCESS:
        raise NvmlError(f"{name} returned {status}")


def _text(lib: Any, name: str, *args: Any) -> str:
    buffer = ctypes.create_string_buffer(_BUFFER)
    _check(lib, name, *args, buffer, ctypes.c_uint(_BUFFER))
    return buffer.value.decode(errors="replace")


def _uint(lib: Any, name: str, *args: Any) -> int:
    value = ctypes.c_uint(0)
    _check(lib, name, *args, ctypes.pointer(value))
    return int(value.value)


def _handle(lib: Any, uuid: str | None, index: int) -> ctypes.c_void_p:
    """The device by its UUID (what torch reports: robust to CUDA_VISIBLE_DEVICES),
    else by index."""
    handle = ctypes.c_void_p()
    if uuid:
        name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.pointer(handle)) == 0:
            return handle
    _check(lib, "nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.pointer(handle))
    return handle


def _open(uuid: str | None, index: int, lib: Any) -> tuple[Any, ctypes.c_void_p]:
    """The library (``lib``, else the driver's), initialised, and the device's handle."""
    lib = lib or load_library()
    _check(lib, "nvmlInit_v2")
    return lib, _handle(lib, uuid, index)


def gpu_facts(uuid: str | None, index: int, lib: Any = None) -> dict[str, Any]:
    """Driver version, UUID, SM clock now and its maximum, or ``source: unavailable``."""
    try:
        lib, handle = _open(uuid, index, lib)
        return {
            "source": "nvml",
            "driver_version": _text(lib, "nvmlSystemGetDriverVersion"),
            "uuid": _text(lib, "nvmlDeviceGetUUID", handle),
            "sm_clock_mhz": _uint(lib, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM),
            "sm_clock_max_mhz": _uint(lib, "nvmlDeviceGetMaxClockInfo", handle, NVML_CLOCK_SM),
        }
    except (NvmlError, AttributeError) as exc:
        return {"source": "unavailable", "error": str(exc)}


def sm_clock_reader(uuid: str | None, index: int, lib: Any = None) -> Callable[[], float | None]:
    """A reader of the device's current SM clock in MHz (None when NVML cannot tell)."""
    try:
        lib, handle = _open(uuid, index, lib)
    except (NvmlError, AttributeError):
        return lambda: None

    def read() -> float | None:
        try:
            return float(_uint(lib, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM))
        except NvmlError:
            return None

    return read
