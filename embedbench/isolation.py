"""Process isolation for measurement: one pinned core, one torch thread, no gc.

``isolated()`` is a context manager that restores the caller's CPU affinity,
torch thread count and gc state on exit, also when the body raises.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import torch

from embedbench.errors import ConfigError


def allowed_cores() -> list[int]:
    """The CPU cores this process may run on, sorted."""
    return sorted(os.sched_getaffinity(0))


def resolve_cpu_core(requested: int | None) -> int:
    """The requested core if it is in the allowed set; default the lowest allowed core."""
    cores = allowed_cores()
    if requested is None:
        return cores[0]
    if requested not in cores:
        raise ConfigError(
            f"cpu core {requested} is not in this process's allowed affinity set {cores}; "
            f"pass --cpu-core with one of them"
        )
    return requested


@dataclass
class IsolationState:
    """What ``isolated`` applied; recorded in the run metadata."""

    cpu_core: int
    torch_threads: int
    interop_threads: int
    interop_threads_set: bool
    gc_disabled: bool
    inference_mode: bool

    def to_json(self) -> dict[str, object]:
        """Plain JSON values."""
        return asdict(self)


def _set_interop_threads(count: int) -> bool:
    """Set torch's inter-op pool size; torch allows this only before the pool starts."""
    if torch.get_num_interop_threads() == count:
        return True
    try:
        torch.set_num_interop_threads(count)
    except RuntimeError:
        return False
    return torch.get_num_interop_threads() == count


@contextlib.contextmanager
def isolated(cpu_core: int) -> Iterator[IsolationState]:
    """Pin the calling thread to ``cpu_core``, 1 torch thread, gc off, inference mode."""
    core = resolve_cpu_core(cpu_core)
    saved_affinity = os.sched_getaffinity(0)
    saved_threads = torch.get_num_threads()
    saved_gc = gc.isenabled()
    interop_ok = _set_interop_threads(1)
    try:
        os.sched_setaffinity(0, {core})
        torch.set_num_threads(1)
        gc.collect()
        gc.disable()
        with torch.inference_mode():
            yield IsolationState(
                cpu_core=core,
                torch_threads=torch.get_num_threads(),
                interop_threads=torch.get_num_interop_threads(),
                interop_threads_set=interop_ok,
                gc_disabled=not gc.isenabled(),
                inference_mode=torch.is_inference_mode_enabled(),
            )
    finally:
        if saved_gc:
            gc.enable()
        torch.set_num_threads(saved_threads)
        os.sched_setaffinity(0, saved_affinity)
