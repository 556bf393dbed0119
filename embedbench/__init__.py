"""embedbench: paired host-latency microbenchmark of Qwen2.5-Omni's embed_input_ids.

The public API (docs/api.md): ``RunConfig``, ``run``, ``load_results`` and
``paired_benchmark``, what they return (``RunResult``, ``PairedResult``) and the errors
they raise (``EmbedbenchError`` and its ``ConfigError``, ``CheckpointError``,
``OutputDirError``). They are imported on first use, so that ``import
embedbench.<module>`` (a worker process, the report side) loads only what it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CheckpointError": "embedbench.errors",
    "ConfigError": "embedbench.errors",
    "EmbedbenchError": "embedbench.errors",
    "OutputDirError": "embedbench.errors",
    "PairedResult": "embedbench.runner",
    "RunConfig": "embedbench.config",
    "RunResult": "embedbench.report.results",
    "load_results": "embedbench.report.results",
    "paired_benchmark": "embedbench.runner",
    "run": "embedbench.runner",
}

__all__ = [
    "CheckpointError",
    "ConfigError",
    "EmbedbenchError",
    "OutputDirError",
    "PairedResult",
    "RunConfig",
    "RunResult",
    "load_results",
    "paired_benchmark",
    "run",
]

if TYPE_CHECKING:
    from embedbench.config import RunConfig
    from embedbench.errors import CheckpointError, ConfigError, EmbedbenchError, OutputDirError
    from embedbench.report.results import RunResult, load_results
    from embedbench.runner import PairedResult, paired_benchmark, run


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'embedbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
