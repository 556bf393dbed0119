"""Device choice and the explicit sync that brackets every timed call."""

from __future__ import annotations

import torch

from embedbench.errors import ConfigError
from embedbench.timing import Sync, no_sync


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


def sync_for(device: torch.device) -> Sync:
    """``torch.cuda.synchronize`` for a CUDA device, a no-op for the CPU."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()

        def cuda_sync() -> None:
            torch.cuda.synchronize(index)

        return cuda_sync
    return no_sync
